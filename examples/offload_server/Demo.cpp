#include "Demo.h"

namespace offload {
int runDemo() { return 1; }
}  // namespace offload
