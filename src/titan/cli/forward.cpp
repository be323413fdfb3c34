// titan forward (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_forward(const Args& args) { fail("titan forward is not implemented yet"); }

}  // namespace titan::cli
