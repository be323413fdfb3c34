// A pickle reader that runs nothing: a small pickle machine for the opcodes torch's DCP
// checkpoints use, which turns the pickle into data (pickle_value.h) and admits only the
// globals of one kind of pickle, as torch.load(weights_only=True) does. Any other global
// (os.system, builtins.eval, ...) or opcode is one titan::Error naming the file and the
// global, raised before anything after it is read; nothing a pickle names is ever called.
// docs/from_torchtitan.md ("Your checkpoints") describes the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "titan/checkpoint/pickle_value.h"

namespace titan::checkpoint::pickle {

enum class Admits {
  // Plain data: None, bool, int, float, str, tuple, list, dict, and bytes (protocol 2 writes
  // them as _codecs.encode(str, 'latin1')). A DCP checkpoint's non-tensor items, and
  // torchtitan's data-loader state inside one.
  kPlainData,
  // A DCP checkpoint's .metadata: plain data and DCP's metadata classes
  // (torch.distributed.checkpoint.metadata.*, filesystem._StorageInfo), torch.Size, torch's
  // dtypes, torch.strided, and the checkpoint's path (pathlib).
  kDcpMetadata,
  // A torch.save archive's data.pkl holding one tensor: plain data and
  // torch._utils._rebuild_tensor_v2 over a typed storage (torch.FloatStorage, ...).
  kTensor,
};

// Reads one pickle (protocols 2 to 5). `source` names it in errors ("step-2/.metadata").
ValuePtr unpickle(const uint8_t* data, size_t size, Admits admits, const std::string& source);

}  // namespace titan::checkpoint::pickle
