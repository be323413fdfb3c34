// titan_tokenizer_bench TOKENIZER_DIR CORPUS.jsonl [REPEATS]: the tokenizer alone, in process, on
// one thread. Prints the load time of Tokenizer::from_directory, the best-of-REPEATS encode
// throughput in MB/s of UTF-8 text (encode_into over every document with a freshly loaded
// tokenizer each time, so that its word cache starts cold as in `titan tokenize`), and a checksum
// of the ids so that a change in the output shows up next to a change in speed.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: titan_tokenizer_bench TOKENIZER_DIR CORPUS.jsonl [REPEATS]\n";
    return 2;
  }
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
  std::vector<std::string> texts;
  size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
      bytes += texts.back().size();
    }
  }
  double best = 1e30, load = 1e30;
  uint64_t checksum = 0, tokens = 0;
  std::vector<int32_t> ids;
  for (int r = 0; r < repeats; ++r) {
    checksum = tokens = 0;
    auto start = std::chrono::steady_clock::now();
    const auto tok = titan::data::Tokenizer::from_directory(argv[1]);
    load = std::min(load, seconds_since(start));
    start = std::chrono::steady_clock::now();
    for (const std::string& text : texts) {
      ids.clear();
      tok.encode_into(text, ids);
      tokens += ids.size();
      for (const int32_t id : ids) checksum = checksum * 1000003 + static_cast<uint32_t>(id);
    }
    best = std::min(best, seconds_since(start));
  }
  std::cout << "documents " << texts.size() << ", " << bytes / 1e6 << " MB, " << tokens
            << " tokens, checksum " << checksum << "\n"
            << "load (best) " << load << " s\n"
            << "encode (1 thread, best of " << repeats << ") " << bytes / 1e6 / best << " MB/s ("
            << best << " s)\n";
  return 0;
}
