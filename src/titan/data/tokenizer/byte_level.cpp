#include "titan/data/tokenizer/byte_level.h"

#include <vector>

namespace titan::data {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// are shifted to U+0100.. in byte order.
struct ByteTable {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every mapped code point is below U+0200

  ByteTable() {
    from_cp.fill(-1);
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + shifted++);
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

// Length of the valid UTF-8 sequence at s[i] (>= 1), or minus the length of the maximal invalid
// prefix (<= -1) in the sense of the Unicode standard's "maximal subpart" (which Rust follows).
int utf8_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return -k;
    const uint8_t b = byte(i + k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -k;
  }
  return need + 1;
}

}  // namespace

char32_t byte_to_code_point(uint8_t b) { return table().to_cp[b]; }

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  if (cp >= table().from_cp.size() || table().from_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(table().from_cp[cp]);
}

std::string byte_to_unicode_string(uint8_t b) {
  std::string out;
  append_utf8(out, byte_to_code_point(b));
  return out;
}

std::string byte_level_token_to_bytes(std::string_view token) {
  // Every code point of the alphabet is below U+0200, so one or two UTF-8 bytes; decoded here
  // directly, as this runs for each of the 151k tokens at start-up.
  const ByteTable& t = table();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const auto b0 = static_cast<uint8_t>(token[i]);
    char32_t cp = 0x200;  // outside the alphabet
    size_t n = 1;
    if (b0 < 0x80) {
      cp = b0;
    } else if (b0 >= 0xC2 && b0 <= 0xC7 && i + 1 < token.size() &&
               (static_cast<uint8_t>(token[i + 1]) & 0xC0) == 0x80) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3F);
      n = 2;
    }
    if (cp >= t.from_cp.size() || t.from_cp[cp] < 0) return std::string(token);
    out.push_back(static_cast<char>(t.from_cp[cp]));
    i += n;
  }
  return out;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const int n = utf8_sequence(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      i += -n;
    }
  }
  return out;
}

int decode_utf8(std::string_view s, size_t i, char32_t* cp) {
  const int n = utf8_sequence(s, i);
  if (n <= 0) return 0;
  const auto b = [&](int k) { return static_cast<char32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (n) {
    case 1:
      *cp = b(0);
      break;
    case 2:
      *cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
      break;
    case 3:
      *cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
      break;
    default:
      *cp = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
  return n;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII fast path: 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t chunk;
      __builtin_memcpy(&chunk, s.data() + i, 8);
      if (chunk & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const int n = utf8_sequence(s, i);
    if (n <= 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace titan::data
