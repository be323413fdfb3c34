#include "titan/lora/base_fingerprint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace fs = std::filesystem;

namespace titan::lora {
namespace {

// A fast 64-bit hash of a byte range (four multiply-xorshift lanes over 8-byte words; not
// cryptographic: it tells bases apart, it does not defend against forgery).
class Hash64 {
 public:
  void update(const uint8_t* data, uint64_t size) {
    uint64_t i = 0;
    for (; i + 32 <= size; i += 32) {
      for (int lane = 0; lane < 4; ++lane) {
        uint64_t w;
        std::memcpy(&w, data + i + 8 * lane, 8);
        lanes_[lane] = mix(lanes_[lane] ^ w);
      }
    }
    for (; i < size; ++i) lanes_[0] = mix(lanes_[0] ^ data[i]);
    length_ += size;
  }
  void update(const std::string& text) {
    update(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  }
  uint64_t digest() const {
    uint64_t h = length_;
    for (uint64_t lane : lanes_) h = mix(h ^ lane);
    return h;
  }

 private:
  static uint64_t mix(uint64_t x) {
    x *= 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    return x ^ (x >> 32);
  }
  uint64_t lanes_[4] = {1, 2, 3, 4};
  uint64_t length_ = 0;
};

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

BaseFingerprint BaseFingerprint::from_json(const nlohmann::json& j, const std::string& where) {
  TITAN_CHECK(j.is_object() && j.contains("source") && j["source"].is_string() &&
                  j.contains("digest") && j["digest"].is_string(),
              where, ": the LoRA base fingerprint must be {\"source\": ..., \"digest\": ...}");
  return {j["source"].get<std::string>(), j["digest"].get<std::string>()};
}

BaseFingerprint fingerprint_hf_folder(const std::string& dir) {
  TITAN_CHECK(fs::is_directory(dir), dir, ": not a directory (the LoRA base)");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && (name.ends_with(".safetensors") || name == "config.json"))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  Hash64 hash;
  for (const std::string& name : names) {
    const auto file = MappedFile::open((fs::path(dir) / name).string());
    hash.update(name + ":" + std::to_string(file->size()) + ";");
    hash.update(file->data(), file->size());
  }
  return {fs::absolute(dir).lexically_normal().string(), hex(hash.digest())};
}

constexpr std::string_view kSeedPrefix = "seed ";

std::optional<uint64_t> BaseFingerprint::seed() const {
  if (!source.starts_with(kSeedPrefix)) return std::nullopt;
  const std::string digits = source.substr(kSeedPrefix.size());
  TITAN_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos,
              "LoRA base '", source, "': not a seed");
  return std::stoull(digits);
}

BaseFingerprint fingerprint_seeded(uint64_t seed, const nlohmann::json& hf_config) {
  const std::string source = std::string(kSeedPrefix) + std::to_string(seed);
  Hash64 hash;
  hash.update(source + " " + hf_config.dump());
  return {source, hex(hash.digest())};
}

void check_same_base(const BaseFingerprint& saved, const BaseFingerprint& current,
                     const std::string& checkpoint_dir) {
  TITAN_CHECK(saved.digest == current.digest, checkpoint_dir,
              ": this LoRA checkpoint trained adapters on the base ", saved.source, " (digest ",
              saved.digest, "), but this run's base is ", current.source, " (digest ",
              current.digest, "); resume with the same base (checkpoint.initial_load_path)");
}

}  // namespace titan::lora
