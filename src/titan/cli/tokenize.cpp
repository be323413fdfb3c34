// titan tokenize (stub until implemented).
#include "titan/cli/commands.h"
#include "titan/common/error.h"

namespace titan::cli {

int run_tokenize(const Args& args) { fail("titan tokenize is not implemented yet"); }

}  // namespace titan::cli
