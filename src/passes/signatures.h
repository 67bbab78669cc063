// The signatures of the torch callables that canonicalize and decompose understand: their
// parameters in order, defaults, keyword-only parameters, and what kind of value each one is
// (a dim to normalize, a list of sizes, ...), so that one call can be bound to its parameters
// whatever mix of positional and keyword arguments the user wrote.
//
// A node's callable is Node::callable(): for a core op its table target (the op is the same
// whether the user called torch.sum or Tensor.sum, self first), for a torch node its name.
// Tensor-method forms that only the method accepts (`x.view(2, 3)`, `x.permute(1, 0)`) bind
// through a varargs parameter (`*size`) that gathers the trailing ints into one list.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace ember::passes {

struct Param {
  enum class Kind : uint8_t {
    Any,
    Dim,        // one dim (int) of the first tensor operand, or None
    DimInsert,  // one dim of the result, which has one more dim than the input (unsqueeze, stack)
    Dims,       // an int or a list of ints: dims of the first tensor operand, or None
    Perm,       // a list of dims, order kept (permute)
    Sizes,      // a list of sizes
    Tensors,    // a sequence of tensors, as a list (cat((a, b)) is cat([a, b]))
  };
  std::string name;
  Kind kind = Kind::Any;
  std::optional<ir::Arg> default_value;  // none: required
  bool keyword_only = false;
  bool varargs = false;  // `*size`: gathers the positional ints from here on into one list
};

struct Signature {
  std::string callable;
  std::vector<Param> params;
};

// nullptr for a callable without a signature here.
const Signature* find_signature(std::string_view callable);

// A call bound to its signature: one argument per parameter (given, or the default).
struct Bound {
  const Signature* signature = nullptr;
  std::vector<ir::Arg> args;   // per parameter
  std::vector<bool> given;     // whether the call passed it
  // The argument of the named parameter; std::logic_error if the signature has no such name.
  const ir::Arg& operator[](std::string_view name) const;
  bool was_given(std::string_view name) const;
  size_t index(std::string_view name) const;
};

// Binds a node's arguments, or nullopt when its callable is unknown or the arguments do not fit
// the signature (too many, an unknown keyword, a missing required one).
std::optional<Bound> bind(const ir::Node& node);

// The literal readers (ir/graph.h), by their short names.
using ir::bool_literal;
using ir::int_list;
using ir::int_literal;
using ir::is_none;
using ir::number_literal;
using ir::size_list;
using ir::size_literal;

}  // namespace ember::passes
