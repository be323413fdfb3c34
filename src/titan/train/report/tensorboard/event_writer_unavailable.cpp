// The build without protobuf (it was not found at configure time): no TensorBoard files.
#include "titan/common/error.h"
#include "titan/train/report/tensorboard/event_writer.h"

namespace titan::train {

EventWriter::EventWriter(const std::string& folder) {
  fail(
      "metrics.enable_tensorboard: this titan was built without protobuf (install "
      "libprotobuf-dev and protobuf-compiler, then rebuild), so it cannot write ",
      folder);
}

void EventWriter::add_scalars(int64_t, const std::vector<std::pair<std::string, double>>&) {}
void EventWriter::write_record(const std::string&) {}

}  // namespace titan::train
