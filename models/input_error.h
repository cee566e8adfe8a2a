#pragma once
// User and input errors: a typed exception that says what is wrong and where (a JSON path, a file,
// a flag). Callers at the program boundary print it and exit with status 2.
#include <stdexcept>
#include <string>

namespace trainsim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Broken invariants inside the library: a programming error, not a user error.
[[noreturn]] void invariant_failed(const char* expr, const char* file, int line, const char* msg);

}  // namespace trainsim

#define TRAINSIM_ASSERT(expr, msg) \
  ((expr) ? (void)0 : ::trainsim::invariant_failed(#expr, __FILE__, __LINE__, msg))
