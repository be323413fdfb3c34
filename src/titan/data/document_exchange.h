// DocumentExchange: how the data-parallel ranks share the documents each of them read, so that
// each reads (tokenizes) only its share while all of them pack the same global stream
// (token_stream.h). The distributed room implements it over a CPU process group; the data room
// knows only this interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::data {

class DocumentExchange {
 public:
  virtual ~DocumentExchange() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  // Every member's `mine`, in rank order. A collective: every member calls it the same number
  // of times, in the same order, from one thread at a time. Throws titan::Error when a member
  // fails or stops answering.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

}  // namespace titan::data
