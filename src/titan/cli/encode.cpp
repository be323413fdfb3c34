// titan encode (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_encode(const Args& args) { fail("titan encode is not implemented yet"); }

}  // namespace titan::cli
