// NFC by parts (normalizer.cpp normalizes only the stretches around characters that can change)
// against utf8proc's NFC of the whole text, on random texts mixing ASCII with combining marks,
// Hangul jamo, composition exclusions and singletons.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "titan/data/tokenizer/normalizer.h"

namespace titan::data {
namespace {

std::string whole_nfc(const std::string& text) {
  utf8proc_uint8_t* out = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str()));
  std::string result(reinterpret_cast<const char*>(out));
  std::free(out);
  return result;
}

TEST(Normalizer, NfcByPartsEqualsWholeText) {
  const Normalizer nfc = Normalizer::from_json({{"type", "NFC"}}, "test");
  const std::vector<std::string> atoms = {
      "a",           "e",
      "A",           " ",
      "\n",          "<",
      "=",           "x1",
      "\u0301",      "\u0308",
      "\u0327",      "\u0323",
      "\u0338",  // combining long solidus: < + it composes to U+226E
      "\u00e9",      "\u00c5",
      "\u212b",  // é, Å, and the singleton ANGSTROM SIGN
      "\u1100",      "\u1161",
      "\u11a8",      "\uac00",        // Hangul L, V, T and an LV syllable
      "\u0958",      "\u0915\u093c",  // a composition exclusion and its pieces
      "\u4e2d",      "\U0001F600",
      "\u0345",      "\u0f73",
      "\u1e9b\u0323"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, atoms.size() - 1), count(1, 12);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += atoms[pick(rng)];
    std::string storage;
    ASSERT_EQ(std::string(nfc.apply(text, storage)), whole_nfc(text))
        << "text: " << nlohmann::json(text).dump();
  }
}

}  // namespace
}  // namespace titan::data
