// Pieces of the graph IR's text form that other IRs' text forms reuse (the loop IR prints its
// extern calls' arguments exactly as graph IR arguments, and its literals the same way), so the
// spelling of a float, a string or an argument list is defined once (print.cpp).
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace ember::ir {

// A float that parses back to the same bits: always shows '.', 'e', inf or nan.
std::string format_float(double v);
// A double-quoted string literal; the text stays valid UTF-8 whatever the bytes.
std::string quote(std::string_view s);
// [A-Za-z_][A-Za-z0-9_]*: names printed bare; anything else is quoted.
bool is_identifier(std::string_view s);
// A call argument; value references print as `value_prefix` followed by the id (`%3`, `%b3`).
std::string print_arg(const Arg& arg, std::string_view value_prefix = "%");

}  // namespace ember::ir
