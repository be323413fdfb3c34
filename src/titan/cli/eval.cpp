// titan eval (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_eval(const Args& args) { fail("titan eval is not implemented yet"); }

}  // namespace titan::cli
