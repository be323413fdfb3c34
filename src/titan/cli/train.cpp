// titan train (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_train(const Args& args) { fail("titan train is not implemented yet"); }

}  // namespace titan::cli
