// titan convert (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_convert(const Args& args) { fail("titan convert is not implemented yet"); }

}  // namespace titan::cli
