// GPT-2's byte-level mapping, as Hugging Face `tokenizers` uses it (ByteLevel pre-tokenizer and
// decoder): every byte 0..255 is shown as one printable Unicode character, so that a BPE vocabulary
// of strings can cover arbitrary bytes. Encoding works on raw bytes and never builds these strings;
// the mapping is needed only to read the vocabulary and to decode.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace titan::data {

// The code point that stands for byte b (e.g. ' ' -> U+0120 'Ġ').
char32_t byte_to_code_point(uint8_t b);

// The inverse: the byte a code point stands for, or nullopt for a code point outside the 256.
std::optional<uint8_t> code_point_to_byte(char32_t cp);

// The UTF-8 string of byte_to_code_point(b).
std::string byte_to_unicode_string(uint8_t b);

// Decodes a token written in the byte-level alphabet back to its raw bytes. Like HF's ByteLevel
// decoder, a token holding any character outside the alphabet (possible for an added token written
// verbatim, e.g. one with CJK characters) is taken as its own UTF-8 bytes instead.
std::string byte_level_token_to_bytes(std::string_view token);

// Turns bytes into valid UTF-8 exactly as Rust's String::from_utf8_lossy does: every maximal
// invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Decodes one UTF-8 code point at s[i]; returns its length in bytes, or 0 when invalid.
int decode_utf8(std::string_view s, size_t i, char32_t* cp);

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, char32_t cp);

// Offset of the first byte that does not start a valid UTF-8 sequence, or npos when s is valid.
size_t find_invalid_utf8(std::string_view s);

}  // namespace titan::data
