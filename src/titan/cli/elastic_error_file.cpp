#include "titan/cli/elastic_error_file.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "titan/common/file_util.h"

namespace titan::cli {

void write_elastic_error_file(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  // The layout of torch.distributed.elastic.multiprocessing.errors.ErrorHandler.record_exception;
  // the summary prints py_callstack as the failure's traceback.
  const nlohmann::json data = {
      {"message",
       {{"message", "titan: " + message},
        {"extraInfo",
         {{"py_callstack", "error: " + message},
          {"timestamp",
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count())}}}}}};
  try {
    write_file_atomic(path, data.dump());
  } catch (const std::exception& e) {
    std::cerr << "[titan] could not write TORCHELASTIC_ERROR_FILE " << path << ": " << e.what()
              << std::endl;
  }
}

}  // namespace titan::cli
