// titan configs (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_configs(const Args& args) { fail("titan configs is not implemented yet"); }

}  // namespace titan::cli
