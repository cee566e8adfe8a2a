#include "input_error.h"

#include <cstdio>
#include <cstdlib>

namespace trainsim {

void invariant_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "internal error: %s (%s) at %s:%d\n", msg, expr, file, line);
  std::abort();
}

}  // namespace trainsim
