// titan decode (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_decode(const Args& args) { fail("titan decode is not implemented yet"); }

}  // namespace titan::cli
