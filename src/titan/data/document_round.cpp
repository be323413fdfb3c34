#include "titan/data/document_round.h"

#include <cstring>

#include "titan/common/error.h"

namespace titan::data {
namespace {

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <class T>
void put_array(std::string& out, const std::vector<T>& values) {
  put<uint64_t>(out, values.size());
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class Cursor {
 public:
  explicit Cursor(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  template <class T>
  std::vector<T> get_array() {
    const uint64_t n = get<uint64_t>();
    TITAN_CHECK(n <= (bytes_.size() - at_) / sizeof(T), "document round: a count of ", n,
                " runs past the end of the message");
    std::vector<T> values(n);
    std::memcpy(values.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return values;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void need(size_t n) const {
    TITAN_CHECK(bytes_.size() - at_ >= n, "document round: the message is truncated");
  }
  const std::string& bytes_;
  size_t at_ = 0;
};

constexpr uint32_t kMagic = 0x7469646f;  // "odit"

}  // namespace

std::string encode_round(const std::vector<ReadDocument>& documents) {
  std::string out;
  put(out, kMagic);
  put<uint64_t>(out, documents.size());
  for (const ReadDocument& d : documents) {
    put(out, d.place);
    put(out, static_cast<uint8_t>(d.failure));
    put_array(out, std::vector<char>(d.error.begin(), d.error.end()));
    put_array(out, d.tokens);
    put_array(out, d.trainable);
  }
  return out;
}

std::vector<ReadDocument> decode_round(const std::string& bytes) {
  Cursor in(bytes);
  TITAN_CHECK(in.get<uint32_t>() == kMagic, "document round: not a round of documents");
  const uint64_t n = in.get<uint64_t>();
  std::vector<ReadDocument> out;
  for (uint64_t i = 0; i < n; ++i) {
    ReadDocument d;
    d.place = in.get<int64_t>();
    const uint8_t failure = in.get<uint8_t>();
    TITAN_CHECK(failure <= 2, "document round: unknown failure kind ", int(failure));
    d.failure = static_cast<ReadDocument::Failure>(failure);
    const std::vector<char> error = in.get_array<char>();
    d.error.assign(error.begin(), error.end());
    d.tokens = in.get_array<int32_t>();
    d.trainable = in.get_array<uint8_t>();
    TITAN_CHECK(d.trainable.size() == d.tokens.size(), "document round: ", d.tokens.size(),
                " tokens with ", d.trainable.size(), " flags");
    out.push_back(std::move(d));
  }
  TITAN_CHECK(in.done(), "document round: bytes after the last document");
  return out;
}

}  // namespace titan::data
