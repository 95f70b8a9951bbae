// error_context.hpp: adding where an error happened to its message, keeping its type. A reader
// deep inside a load (a run config's validation, a tokenizer's rebuild) knows the fact but not
// the file; the function that opened the file catches the error and rethrows it with the file.
//
//   try { ... } catch (const Error& e) { rethrow_with_context(e, "checkpoint " + dir); }
#pragma once
#include <string>

#include "core/error.hpp"

namespace ampgrad {

// Throws a copy of `e` of the same ampgrad error type (the most derived of core/error.hpp's; a
// subtype defined elsewhere becomes its core base) whose message is "<context>: <e.what()>", or
// rethrows `e` itself when its message already contains `context`. Call it inside the catch block
// that caught `e` (the rethrow is a bare `throw;`).
[[noreturn]] void rethrow_with_context(const Error& e, const std::string& context);

}  // namespace ampgrad
