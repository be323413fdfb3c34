#include "titan/data/tokenizer/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include "titan/common/error.h"

namespace titan::data {
namespace {

using json = nlohmann::json;

class Handler : public nlohmann::json_sax<json> {
 public:
  Handler(TokenizerJson& out, const std::string& file) : out_(out), file_(file) {}

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_entry(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return vocab_entry(static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ != Mode::kNone) bad_entry();
    return value(json(v));
  }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      const size_t space = v.find(' ');
      if (space == std::string::npos)
        fail("tokenizer file ", file_, ": merge '", v, "' is not 'a b'");
      out_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ == Mode::kVocab) bad_entry();
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return value(json()); }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kNone) bad_entry();
    if (at_model_key("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      value(json::object());
      return true;
    }
    push(json::object());
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNone;
      return true;
    }
    pop();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kNone) bad_entry();
    if (at_model_key("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      value(json::array());
      return true;
    }
    push(json::array());
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) fail("tokenizer file ", file_, ": a merge is not a pair [a, b]");
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kNone;
      return true;
    }
    pop();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    fail("tokenizer file ", file_, " is not valid JSON (byte ", position, "): ", e.what());
  }

 private:
  enum class Mode { kNone, kVocab, kMerges, kMergePair };

  bool at_model_key(const char* name) const {
    return stack_.size() == 2 && names_[1] == "model" && key_ == name;
  }
  bool vocab_entry(int64_t id) {
    out_.vocab.emplace_back(std::move(key_), id);
    return true;
  }
  [[noreturn]] void bad_entry() const {
    fail("tokenizer file ", file_,
         ": model.vocab must map tokens to integer ids and model.merges "
         "must hold 'a b' strings or [a, b] pairs");
  }
  // Adds a scalar or an empty container to the open container (or makes it the root).
  json* value_ptr(json v) {
    if (stack_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json v) {
    value_ptr(std::move(v));
    return true;
  }
  void push(json container) {
    std::string name = stack_.empty() || stack_.back()->is_array() ? std::string() : key_;
    stack_.push_back(value_ptr(std::move(container)));
    names_.push_back(std::move(name));
  }
  void pop() {
    stack_.pop_back();
    names_.pop_back();
  }

  TokenizerJson& out_;
  const std::string& file_;
  // Open containers (pointers stay valid: only closed siblings of an array's last child move).
  std::vector<json*> stack_;
  std::vector<std::string> names_;  // key under which each open container sits
  std::string key_;
  Mode mode_ = Mode::kNone;
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("tokenizer file ", file, " not found or not readable");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_tokenizer_json(buffer.str(), file);
}

TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& file) {
  TokenizerJson out;
  Handler handler(out, file);
  nlohmann::json::sax_parse(text, &handler);
  return out;
}

}  // namespace titan::data
