#include "titan/data/tokenizer/tokenizer.h"

#include <filesystem>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/data/tokenizer/added_tokens.h"
#include "titan/data/tokenizer/bpe_model.h"
#include "titan/data/tokenizer/byte_level.h"
#include "titan/data/tokenizer/normalizer.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/tokenizer_cache.h"
#include "titan/data/tokenizer/tokenizer_json.h"

namespace titan::data {
namespace {

// Working memory of one encode call.
struct EncodeScratch {
  explicit EncodeScratch(WordCache& c) : cache(c) {}
  WordCache& cache;
  std::vector<TextSegment> segments, normalized_segments;
  std::string normalized_storage;
  PreTokenizerScratch pre;
  BpeScratch bpe;
};

void check_section(const nlohmann::json& j, const char* key, const char* allowed,
                   const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return;
  const std::string type = j[key].value("type", "");
  if (type != allowed) {
    fail("tokenizer file ", file, ": ", key, " type '", type, "' is not supported (only ", allowed,
         " or null)");
  }
}

}  // namespace

struct Tokenizer::Impl {
  std::string path;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedTokenMatcher raw_added;         // added tokens with normalized = false
  AddedTokenMatcher normalized_added;  // added tokens with normalized = true
  std::unordered_map<std::string, int32_t> added_ids;
  std::vector<std::string> id_bytes;  // what each id decodes to (before UTF-8 repair)
  std::vector<bool> id_valid;
  mutable WordCachePool caches;

  void encode_plain(std::string_view text, EncodeScratch& s, std::vector<int32_t>& out) const {
    const std::string_view normalized = normalizer.apply(text, s.normalized_storage);
    if (normalized_added.empty()) {
      encode_words(normalized, s, out);
      return;
    }
    s.normalized_segments.clear();
    normalized_added.split(normalized, s.normalized_segments);
    for (const TextSegment& seg : s.normalized_segments) {
      if (seg.id >= 0) {
        out.push_back(seg.id);
      } else {
        encode_words(normalized.substr(seg.begin, seg.end - seg.begin), s, out);
      }
    }
  }

  void encode_words(std::string_view text, EncodeScratch& s, std::vector<int32_t>& out) const {
    pre_tokenizer.split(text, s.pre);
    for (std::string_view word : s.pre.pieces) model.encode_word(word, s.bpe, s.cache, out);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_directory(const std::string& dir, bool use_cache) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file =
      fs::is_regular_file(dir, ec) ? dir : (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(file, ec)) fail("tokenizer file ", file, " not found");
  TokenizerJson parsed = use_cache ? read_tokenizer_json_cached(file) : read_tokenizer_json(file);
  const nlohmann::json& j = parsed.rest;
  auto impl = std::make_unique<Impl>();
  impl->path = file;
  try {
    if (!j.is_object() || !j.contains("model"))
      fail("tokenizer file ", file, ": no 'model' section");
    if (j.contains("truncation") && !j["truncation"].is_null()) {
      fail("tokenizer file ", file, ": truncation is not supported (set it to null)");
    }
    if (j.contains("padding") && !j["padding"].is_null()) {
      fail("tokenizer file ", file, ": padding is not supported (set it to null)");
    }
    check_section(j, "post_processor", "ByteLevel", file);
    check_section(j, "decoder", "ByteLevel", file);
    impl->normalizer = Normalizer::from_json(j.value("normalizer", nlohmann::json()), file);
    impl->pre_tokenizer = PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json()), file);
    impl->model = BpeModel::from_parts(j["model"], std::move(parsed.vocab), parsed.merges, file);
    parsed.merges = {};

    std::vector<AddedToken> raw, normalized;
    std::vector<std::pair<int32_t, std::string>> added_contents;
    int32_t bound = impl->model.id_bound();
    for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
      AddedToken a;
      a.id = t.at("id").get<int32_t>();
      a.content = t.at("content").get<std::string>();
      a.single_word = t.value("single_word", false);
      a.lstrip = t.value("lstrip", false);
      a.rstrip = t.value("rstrip", false);
      a.normalized = t.value("normalized", false);
      a.special = t.value("special", false);
      if (a.id < 0)
        fail("tokenizer file ", file, ": added token '", a.content, "' has a negative id");
      impl->added_ids[a.content] = a.id;
      added_contents.emplace_back(a.id, a.content);
      bound = std::max(bound, a.id + 1);
      if (a.normalized) {
        // Normalized tokens are searched in normalized text, so normalize them too.
        std::string storage;
        a.content = std::string(impl->normalizer.apply(a.content, storage));
        normalized.push_back(std::move(a));
      } else {
        raw.push_back(std::move(a));
      }
    }
    impl->id_bytes.resize(bound);
    impl->id_valid.assign(bound, false);
    for (int32_t id = 0; id < impl->model.id_bound(); ++id) {
      if (const std::string* token = impl->model.id_to_token(id)) {
        impl->id_bytes[id] = byte_level_token_to_bytes(*token);
        impl->id_valid[id] = true;
      }
    }
    for (const auto& [id, content] : added_contents) {
      // The ByteLevel decoder sees added tokens too (HF passes every token through it).
      impl->id_bytes[id] = byte_level_token_to_bytes(content);
      impl->id_valid[id] = true;
    }
    impl->raw_added = AddedTokenMatcher(std::move(raw));
    impl->normalized_added = AddedTokenMatcher(std::move(normalized));
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer file ", file, ": unexpected structure: ", e.what());
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_into(text, ids);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out) const {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    fail("cannot encode: text is not valid UTF-8 (byte offset ", bad, ")");
  }
  const auto cache = impl_->caches.take();
  EncodeScratch s(*cache);
  if (impl_->raw_added.empty()) {
    impl_->encode_plain(text, s, out);
    return;
  }
  impl_->raw_added.split(text, s.segments);
  for (const TextSegment& seg : s.segments) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
    } else {
      impl_->encode_plain(text.substr(seg.begin, seg.end - seg.begin), s, out);
    }
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(impl_->id_valid.size()) || !impl_->id_valid[id]) {
      fail("cannot decode token id ", id, ": not in the vocabulary of ", impl_->path, " (ids 0..",
           impl_->id_valid.size() - 1, ")");
    }
    bytes += impl_->id_bytes[id];
  }
  return utf8_lossy(bytes);
}

int32_t Tokenizer::token_to_id(const std::string& token) const {
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  if (const auto id = impl_->model.token_to_id(token)) return *id;
  fail("token '", token, "' is not in the vocabulary of ", impl_->path);
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_valid.size()); }

const std::string& Tokenizer::path() const { return impl_->path; }

}  // namespace titan::data
