// The build without Arrow C++ (pyarrow was not found at configure time, or TITAN_ARROW=OFF):
// Parquet and Arrow files are recognised by name and refused with a clear message.
#include "titan/common/error.h"
#include "titan/data/arrow/arrow_sources.h"

namespace titan::data {
namespace {

[[noreturn]] void unavailable(const std::string& path) {
  fail("dataset file ", path,
       ": this titan was built without Arrow/Parquet support (pyarrow was not found in the "
       "build's Python at configure time); install pyarrow there and rebuild, or convert the "
       "data to .jsonl");
}

}  // namespace

std::unique_ptr<DocumentSource> open_parquet(const std::string& path, const std::string&) {
  unavailable(path);
}

std::unique_ptr<DocumentSource> open_arrow(const std::string& path, const std::string&) {
  unavailable(path);
}

}  // namespace titan::data
