// One round of shared reading (token_stream.h): the documents one rank read for a run of
// places of the stream's order, as bytes for DocumentExchange::all_gather, and back. A document
// whose reading failed carries the error instead, so that every rank raises it, with its type,
// when its stream reaches that document, exactly as a rank reading alone would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::data {

struct ReadDocument {
  int64_t place = 0;  // in the epoch's order
  enum class Failure : uint8_t { kNone = 0, kData = 1, kOther = 2 };
  Failure failure = Failure::kNone;
  std::string error;  // the message, when it failed
  std::vector<int32_t> tokens;
  std::vector<uint8_t> trainable;
};

std::string encode_round(const std::vector<ReadDocument>& documents);
// Throws titan::Error on bytes encode_round did not write (a truncated or foreign message).
std::vector<ReadDocument> decode_round(const std::string& bytes);

}  // namespace titan::data
