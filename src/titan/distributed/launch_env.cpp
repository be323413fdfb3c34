#include "titan/distributed/launch_env.h"

#include <cstdlib>

#include "titan/common/error.h"
#include "titan/config/field_values.h"

namespace titan::distributed {
namespace {

std::string get(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

int64_t get_int(const char* name, int64_t fallback, int64_t minimum) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  int64_t n = 0;
  TITAN_CHECK(config::parse_int64(value, n) && n >= minimum, name, "='", value,
              "' is not an integer >= ", minimum);
  return n;
}

}  // namespace

LaunchEnv launch_env_from_environment() {
  LaunchEnv env;
  env.world_size = get_int("WORLD_SIZE", 1, 1);
  env.rank = get_int("RANK", 0, 0);
  TITAN_CHECK(env.rank < env.world_size, "RANK=", env.rank,
              " is not below WORLD_SIZE=", env.world_size);
  env.local_rank = get_int("LOCAL_RANK", env.rank, 0);
  env.local_world_size = get_int("LOCAL_WORLD_SIZE", env.world_size, 1);
  env.master_addr = get("MASTER_ADDR", "127.0.0.1");
  env.master_port = get_int("MASTER_PORT", 29500, 1);
  TITAN_CHECK(env.master_port <= 65535, "MASTER_PORT=", env.master_port, " is not a port");
  env.agent_store = get("TORCHELASTIC_USE_AGENT_STORE", "") == "True";
  env.restart_count = get("TORCHELASTIC_RESTART_COUNT", "0");
  return env;
}

}  // namespace titan::distributed
