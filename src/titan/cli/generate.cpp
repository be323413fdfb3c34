// titan generate (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_generate(const Args& args) { fail("titan generate is not implemented yet"); }

}  // namespace titan::cli
