// Builds the running interpreter's opcode table (see opcode_table.h) from `dis`, once.
//
// Opcode numbers, argument presence, cache counts, jump direction and local-slot arguments are
// read from `dis` (opmap, hasarg, hasjrel, haslocal, hasfree, _inline_cache_entries), so a
// renumbering (3.13) or a new cache entry needs no change here. What an opcode *means* is keyed on
// its name (kByName); names absent from kByName decode as Opcode::Unsupported. The handful of
// encodings that `dis` only knows as code (arg bit fields, FOR_ITER's skip) are keyed on the minor
// version in `version_facts`, the one place in Ember's decoder that tests the version.
#include "frontend/bytecode/opcode_table.h"

#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>

namespace ember::bytecode {

const char* opcode_name(Opcode op) {
  switch (op) {
#define EMBER_BC(Enum) \
  case Opcode::Enum:   \
    return #Enum;
#include "frontend/bytecode/ops.def"
#undef EMBER_BC
  }
  return "?";
}

namespace detail {

const char* rule_name(Rule rule) {
  switch (rule) {
#define EMBER_BC_RULE_CASE(Enum, Name) \
  case Rule::Enum:                     \
    return Name;
    EMBER_BC_RULES(EMBER_BC_RULE_CASE)
#undef EMBER_BC_RULE_CASE
  }
  return "?";
}

void throw_python_error(const std::string& what) {
  std::string message = what;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (value != nullptr || type != nullptr) {
    PyObject* text = PyObject_Str(value != nullptr ? value : type);
    if (text != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(text);
      if (utf8 != nullptr) message += std::string(": ") + utf8;
      Py_DECREF(text);
    }
    PyErr_Clear();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  throw std::runtime_error(message);
}

std::string qualname_of(PyCodeObject* code) {
  std::string name = "?";
  PyObject* qualname = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_qualname");
  if (qualname != nullptr && PyUnicode_Check(qualname)) {
    const char* utf8 = PyUnicode_AsUTF8(qualname);
    if (utf8 != nullptr) name = utf8;
  }
  Py_XDECREF(qualname);
  PyErr_Clear();
  return name;
}

void throw_malformed(PyCodeObject* code, const std::string& what) {
  throw std::runtime_error("malformed bytecode in " + qualname_of(code) + ": " + what);
}

namespace {

// Owns one strong reference.
struct Ref {
  PyObject* p = nullptr;
  explicit Ref(PyObject* obj) : p(obj) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p); }
  PyObject* get() const { return p; }
};

Ref attr(PyObject* obj, const char* name) {
  PyObject* value = PyObject_GetAttrString(obj, name);
  if (value == nullptr) throw_python_error(std::string("bytecode tables: dis.") + name + " is missing");
  return Ref(value);
}

long as_long(PyObject* obj, const char* what) {
  long value = PyLong_AsLong(obj);
  if (value == -1 && PyErr_Occurred()) throw_python_error(std::string("bytecode tables: ") + what);
  return value;
}

// Calls `fn(number)` for every int in a sequence (dis.hasjrel, dis.hasarg).
template <typename Fn>
void for_each_number(PyObject* seq, const char* what, Fn fn) {
  Ref fast(PySequence_Fast(seq, what));
  if (fast.get() == nullptr) throw_python_error(std::string("bytecode tables: ") + what);
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.get());
  for (Py_ssize_t i = 0; i < n; ++i) fn(as_long(PySequence_Fast_GET_ITEM(fast.get(), i), what));
}

struct NameRule {
  const char* name;
  Opcode op;
  Rule rule;
  Opcode op2 = Opcode::Unsupported;
};

// What each CPython opcode name means in Ember's instruction set. Version-dependent rules
// (LOAD_ATTR) are adjusted in build(); names that exist on one version only simply never match
// on the others.
const NameRule kByName[] = {
    {"CACHE", Opcode::Nop, Rule::Cache},
    {"EXTENDED_ARG", Opcode::Nop, Rule::ExtendedArg},
    {"NOP", Opcode::Nop, Rule::Plain},
    {"RESUME", Opcode::Nop, Rule::Plain},
    {"PRECALL", Opcode::Nop, Rule::Plain},
    {"LOAD_FAST", Opcode::LoadFast, Rule::Plain},
    {"LOAD_FAST_CHECK", Opcode::LoadFast, Rule::Plain},
    {"LOAD_FAST_AND_CLEAR", Opcode::LoadFastAndClear, Rule::Plain},
    {"STORE_FAST", Opcode::StoreFast, Rule::Plain},
    {"DELETE_FAST", Opcode::DeleteFast, Rule::Plain},
    {"LOAD_FAST_LOAD_FAST", Opcode::LoadFast, Rule::FusedFast, Opcode::LoadFast},
    {"STORE_FAST_LOAD_FAST", Opcode::StoreFast, Rule::FusedFast, Opcode::LoadFast},
    {"STORE_FAST_STORE_FAST", Opcode::StoreFast, Rule::FusedFast, Opcode::StoreFast},
    {"LOAD_CONST", Opcode::LoadConst, Rule::Plain},
    {"LOAD_GLOBAL", Opcode::LoadGlobal, Rule::NullBit},
    {"STORE_GLOBAL", Opcode::StoreGlobal, Rule::Plain},
    {"LOAD_NAME", Opcode::LoadName, Rule::Plain},
    {"LOAD_ATTR", Opcode::LoadAttr, Rule::Plain},
    {"LOAD_METHOD", Opcode::LoadMethod, Rule::Plain},
    {"LOAD_SUPER_ATTR", Opcode::LoadSuperAttr, Rule::SuperAttr},
    {"STORE_ATTR", Opcode::StoreAttr, Rule::Plain},
    {"DELETE_ATTR", Opcode::DeleteAttr, Rule::Plain},
    {"LOAD_DEREF", Opcode::LoadDeref, Rule::Plain},
    {"STORE_DEREF", Opcode::StoreDeref, Rule::Plain},
    {"LOAD_CLOSURE", Opcode::LoadClosure, Rule::Plain},
    {"MAKE_CELL", Opcode::MakeCell, Rule::Plain},
    {"COPY_FREE_VARS", Opcode::CopyFreeVars, Rule::Plain},
    {"RETURN_VALUE", Opcode::ReturnValue, Rule::Plain},
    {"RETURN_CONST", Opcode::ReturnConst, Rule::Plain},
    {"POP_TOP", Opcode::PopTop, Rule::Plain},
    {"END_FOR", Opcode::PopN, Rule::EndFor},
    {"COPY", Opcode::Copy, Rule::Plain},
    {"SWAP", Opcode::Swap, Rule::Plain},
    {"PUSH_NULL", Opcode::PushNull, Rule::Plain},
    {"KW_NAMES", Opcode::KwNames, Rule::Plain},
    {"CALL", Opcode::Call, Rule::Plain},
    {"CALL_KW", Opcode::CallKw, Rule::Plain},
    {"CALL_FUNCTION_EX", Opcode::CallFunctionEx, Rule::FlagBit0},
    {"CALL_INTRINSIC_1", Opcode::CallIntrinsic1, Rule::Intrinsic1},
    {"MAKE_FUNCTION", Opcode::MakeFunction, Rule::Plain},
    {"SET_FUNCTION_ATTRIBUTE", Opcode::SetFunctionAttribute, Rule::Plain},
    {"BINARY_OP", Opcode::BinaryOp, Rule::Plain},
    {"BINARY_SUBSCR", Opcode::BinarySubscr, Rule::Plain},
    {"STORE_SUBSCR", Opcode::StoreSubscr, Rule::Plain},
    {"DELETE_SUBSCR", Opcode::DeleteSubscr, Rule::Plain},
    {"BINARY_SLICE", Opcode::BinarySlice, Rule::Plain},
    {"STORE_SLICE", Opcode::StoreSlice, Rule::Plain},
    {"BUILD_SLICE", Opcode::BuildSlice, Rule::Plain},
    {"BUILD_TUPLE", Opcode::BuildTuple, Rule::Plain},
    {"BUILD_LIST", Opcode::BuildList, Rule::Plain},
    {"BUILD_SET", Opcode::BuildSet, Rule::Plain},
    {"BUILD_MAP", Opcode::BuildMap, Rule::Plain},
    {"BUILD_CONST_KEY_MAP", Opcode::BuildConstKeyMap, Rule::Plain},
    {"BUILD_STRING", Opcode::BuildString, Rule::Plain},
    {"LIST_APPEND", Opcode::ListAppend, Rule::Plain},
    {"LIST_EXTEND", Opcode::ListExtend, Rule::Plain},
    {"SET_ADD", Opcode::SetAdd, Rule::Plain},
    {"SET_UPDATE", Opcode::SetUpdate, Rule::Plain},
    {"MAP_ADD", Opcode::MapAdd, Rule::Plain},
    {"DICT_UPDATE", Opcode::DictUpdate, Rule::Plain},
    {"DICT_MERGE", Opcode::DictMerge, Rule::Plain},
    {"LIST_TO_TUPLE", Opcode::ListToTuple, Rule::Plain},
    {"UNPACK_SEQUENCE", Opcode::UnpackSequence, Rule::Plain},
    {"UNPACK_EX", Opcode::UnpackEx, Rule::Plain},
    {"COMPARE_OP", Opcode::CompareOp, Rule::Compare},
    {"IS_OP", Opcode::IsOp, Rule::Plain},
    {"CONTAINS_OP", Opcode::ContainsOp, Rule::Plain},
    {"UNARY_NEGATIVE", Opcode::UnaryNegative, Rule::Plain},
    {"UNARY_POSITIVE", Opcode::UnaryPositive, Rule::Plain},
    {"UNARY_NOT", Opcode::UnaryNot, Rule::Plain},
    {"UNARY_INVERT", Opcode::UnaryInvert, Rule::Plain},
    {"TO_BOOL", Opcode::ToBool, Rule::Plain},
    {"POP_JUMP_IF_TRUE", Opcode::PopJumpIfTrue, Rule::Jump},
    {"POP_JUMP_FORWARD_IF_TRUE", Opcode::PopJumpIfTrue, Rule::Jump},
    {"POP_JUMP_BACKWARD_IF_TRUE", Opcode::PopJumpIfTrue, Rule::Jump},
    {"POP_JUMP_IF_FALSE", Opcode::PopJumpIfFalse, Rule::Jump},
    {"POP_JUMP_FORWARD_IF_FALSE", Opcode::PopJumpIfFalse, Rule::Jump},
    {"POP_JUMP_BACKWARD_IF_FALSE", Opcode::PopJumpIfFalse, Rule::Jump},
    {"POP_JUMP_IF_NONE", Opcode::PopJumpIfNone, Rule::Jump},
    {"POP_JUMP_FORWARD_IF_NONE", Opcode::PopJumpIfNone, Rule::Jump},
    {"POP_JUMP_BACKWARD_IF_NONE", Opcode::PopJumpIfNone, Rule::Jump},
    {"POP_JUMP_IF_NOT_NONE", Opcode::PopJumpIfNotNone, Rule::Jump},
    {"POP_JUMP_FORWARD_IF_NOT_NONE", Opcode::PopJumpIfNotNone, Rule::Jump},
    {"POP_JUMP_BACKWARD_IF_NOT_NONE", Opcode::PopJumpIfNotNone, Rule::Jump},
    {"JUMP_IF_TRUE_OR_POP", Opcode::JumpIfTrueOrPop, Rule::Jump},
    {"JUMP_IF_FALSE_OR_POP", Opcode::JumpIfFalseOrPop, Rule::Jump},
    {"JUMP_FORWARD", Opcode::Jump, Rule::Jump},
    {"JUMP_BACKWARD", Opcode::Jump, Rule::Jump},
    {"JUMP_BACKWARD_NO_INTERRUPT", Opcode::Jump, Rule::Jump},
    {"GET_ITER", Opcode::GetIter, Rule::Plain},
    {"FOR_ITER", Opcode::ForIter, Rule::ForIter},
    {"BEFORE_WITH", Opcode::BeforeWith, Rule::Plain},
    {"WITH_EXCEPT_START", Opcode::WithExceptStart, Rule::Plain},
    {"PUSH_EXC_INFO", Opcode::PushExcInfo, Rule::Plain},
    {"POP_EXCEPT", Opcode::PopExcept, Rule::Plain},
    {"RERAISE", Opcode::Reraise, Rule::Plain},
    {"CHECK_EXC_MATCH", Opcode::CheckExcMatch, Rule::Plain},
    {"RAISE_VARARGS", Opcode::RaiseVarargs, Rule::Plain},
    {"LOAD_ASSERTION_ERROR", Opcode::LoadAssertionError, Rule::Plain},
    {"FORMAT_VALUE", Opcode::FormatSimple, Rule::FormatValue},
    {"FORMAT_SIMPLE", Opcode::FormatSimple, Rule::Plain},
    {"FORMAT_WITH_SPEC", Opcode::FormatWithSpec, Rule::Plain},
    {"CONVERT_VALUE", Opcode::ConvertValue, Rule::Plain},
    {"IMPORT_NAME", Opcode::ImportName, Rule::Plain},
    {"IMPORT_FROM", Opcode::ImportFrom, Rule::Plain},
    {"GET_LEN", Opcode::GetLen, Rule::Plain},
    {"RETURN_GENERATOR", Opcode::ReturnGenerator, Rule::Plain},
    {"YIELD_VALUE", Opcode::YieldValue, Rule::Plain},
};

// Opcodes that never fall through to the next instruction (for the assembler's stack-depth flow).
// `dis` has no list of them; names absent from a version simply never match.
const char* const kEndsBlock[] = {
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_VALUE", "RETURN_CONST",
    "RAISE_VARARGS", "RERAISE",
};

// Opcodes whose argument is a localsplus index. dis.haslocal/hasfree list them on every version
// (checked for 3.11-3.13); the names are added as well so a version whose lists lag behind (3.12
// keeps a removed number in hasfree) still gets the right set. The fused 3.13 ops hold two 4-bit slots.
const char* const kLocalSlot[] = {
    "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "STORE_FAST", "DELETE_FAST", "LOAD_DEREF",
    "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "MAKE_CELL", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF",
};
const char* const kFusedSlots[] = {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"};

bool in_list(const char* name, const char* const* list, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::strcmp(list[i], name) == 0) return true;
  }
  return false;
}

// "POP_JUMP_FORWARD_IF_TRUE" -> "POP_JUMP_BACKWARD_IF_TRUE" and back; "" when the name has neither.
std::string flipped_name(const std::string& name) {
  size_t at = name.find("FORWARD");
  if (at != std::string::npos) return name.substr(0, at) + "BACKWARD" + name.substr(at + 7);
  at = name.find("BACKWARD");
  if (at != std::string::npos) return name.substr(0, at) + "FORWARD" + name.substr(at + 8);
  return "";
}

void set_version_facts(OpcodeTable& t) {
  switch (t.minor) {
    case 11:
      t.compare_shift = 0;
      t.for_iter_skip = 0;  // FOR_ITER jumps straight to its target
      break;
    case 12:
      t.compare_shift = 4;  // low bits: a specialisation mask
      t.for_iter_skip = 1;  // skips END_FOR
      t.end_for_pops = 2;
      break;
    case 13:
      t.compare_shift = 5;
      t.compare_bool_bit = 4;
      t.for_iter_skip = 2;  // skips END_FOR and the POP_TOP after it
      t.end_for_pops = 1;
      t.min_stacksize = 1;  // observed: `def f(): raise` and `while True: pass` get 1, not 0
      break;
    default:
      throw std::runtime_error("Ember's bytecode decoder supports CPython 3.11-3.13, not 3." +
                               std::to_string(t.minor));
  }
}

int running_minor_version() {
  PyObject* version_info = PySys_GetObject("version_info");  // borrowed
  if (version_info == nullptr) throw std::runtime_error("bytecode tables: sys.version_info is missing");
  Ref minor(PySequence_GetItem(version_info, 1));
  if (minor.get() == nullptr) throw_python_error("bytecode tables: sys.version_info[1]");
  return static_cast<int>(as_long(minor.get(), "sys.version_info[1]"));
}

// Index of `name` in a list of names, -1 when absent.
int index_of(PyObject* names, const char* name) {
  Ref fast(PySequence_Fast(names, "intrinsic names"));
  if (fast.get() == nullptr) throw_python_error("bytecode tables: dis._intrinsic_1_descs");
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
    const char* item = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast.get(), i));
    if (item == nullptr) throw_python_error("bytecode tables: dis._intrinsic_1_descs");
    if (std::strcmp(item, name) == 0) return static_cast<int>(i);
  }
  return -1;
}

std::unique_ptr<OpcodeTable> build() {
  auto table = std::make_unique<OpcodeTable>();
  OpcodeTable& t = *table;
  t.minor = running_minor_version();
  set_version_facts(t);

  Ref dis(PyImport_ImportModule("dis"));
  if (dis.get() == nullptr) throw_python_error("bytecode tables: cannot import dis");
  Ref opmap = attr(dis.get(), "opmap");
  if (!PyDict_Check(opmap.get())) throw std::runtime_error("bytecode tables: dis.opmap is not a dict");
  long have_argument = as_long(attr(dis.get(), "HAVE_ARGUMENT").get(), "dis.HAVE_ARGUMENT");
  Ref caches = attr(dis.get(), "_inline_cache_entries");  // list by number (3.11/3.12), dict by name (3.13)
  bool caches_by_name = PyDict_Check(caches.get());

  for (int number = 0; number < 256; ++number) {
    t.names[number] = "<opcode " + std::to_string(number) + ">";
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(opmap.get(), &pos, &key, &value)) {
    long number = as_long(value, "dis.opmap value");
    if (number < 0 || number > 255) continue;  // pseudo-ops never appear in co_code
    const char* name = PyUnicode_AsUTF8(key);
    if (name == nullptr) throw_python_error("bytecode tables: dis.opmap key");
    OpcodeEntry& e = t.entries[number];
    t.names[number] = name;
    e.defined = true;
    e.has_arg = number >= have_argument;
    long count = 0;
    if (caches_by_name) {
      PyObject* item = PyDict_GetItemString(caches.get(), name);  // borrowed, may be absent
      if (item != nullptr) count = as_long(item, "dis._inline_cache_entries value");
    } else {
      Ref item(PySequence_GetItem(caches.get(), number));
      if (item.get() == nullptr) throw_python_error("bytecode tables: dis._inline_cache_entries");
      count = as_long(item.get(), "dis._inline_cache_entries item");
    }
    if (count < 0 || count > 255) throw std::runtime_error("bytecode tables: bad cache count for " + t.names[number]);
    e.caches = static_cast<uint8_t>(count);
    e.backward = std::strstr(name, "BACKWARD") != nullptr;
    if (std::strcmp(name, "END_FOR") == 0) t.end_for_opcode = static_cast<int>(number);
    if (std::strcmp(name, "POP_TOP") == 0) t.pop_top_opcode = static_cast<int>(number);
    for (const NameRule& r : kByName) {
      if (std::strcmp(r.name, name) != 0) continue;
      e.op = r.op;
      e.op2 = r.op2;
      e.rule = r.rule;
    }
  }
  // 3.13 lists which opcodes take an argument (WITH_EXCEPT_START sits at HAVE_ARGUMENT without one).
  if (PyObject_HasAttrString(dis.get(), "hasarg")) {
    for (OpcodeEntry& e : t.entries) e.has_arg = false;
    for_each_number(attr(dis.get(), "hasarg").get(), "dis.hasarg", [&](long n) {
      if (n >= 0 && n < 256) t.entries[n].has_arg = true;
    });
  }
  // Jumps must be relative: an absolute jump would be read as relative and land elsewhere.
  for_each_number(attr(dis.get(), "hasjabs").get(), "dis.hasjabs", [&](long n) {
    if (n >= 0 && n < 256) {
      throw std::runtime_error("bytecode tables: absolute jump " + t.names[n] + " is not supported");
    }
  });
  std::array<bool, 256> relative{};
  for_each_number(attr(dis.get(), "hasjrel").get(), "dis.hasjrel", [&](long n) {
    if (n >= 0 && n < 256) relative[n] = true;
  });
  for (const char* list : {"haslocal", "hasfree"}) {
    for_each_number(attr(dis.get(), list).get(), list, [&](long n) {
      if (n >= 0 && n < 256 && t.entries[n].defined) t.entries[n].local_slots = 1;
    });
  }
  for (int number = 0; number < 256; ++number) {
    OpcodeEntry& e = t.entries[number];
    e.name = t.names[number].c_str();
    e.relative_jump = relative[number];
    if (e.defined) {
      e.ends_block = in_list(e.name, kEndsBlock, std::size(kEndsBlock));
      if (in_list(e.name, kLocalSlot, std::size(kLocalSlot))) e.local_slots = 1;
      if (in_list(e.name, kFusedSlots, std::size(kFusedSlots))) e.local_slots = 2;
      if (std::strcmp(e.name, "EXTENDED_ARG") == 0) t.extended_arg_opcode = number;
      if (std::strcmp(e.name, "CACHE") == 0) t.cache_opcode = number;
      if (std::strcmp(e.name, "RETURN_GENERATOR") == 0) t.return_generator_opcode = number;
    }
    bool jump_rule = e.rule == Rule::Jump || e.rule == Rule::ForIter;
    if (jump_rule && !relative[number]) {
      throw std::runtime_error("bytecode tables: " + t.names[number] + " is not in dis.hasjrel");
    }
    // 3.12 turned LOAD_METHOD into a pseudo-op: LOAD_ATTR's low bit selects the method form.
    if (e.op == Opcode::LoadAttr && t.minor >= 12) e.rule = Rule::MethodBit;
  }
  for (int number = 0; number < 256; ++number) {
    OpcodeEntry& e = t.entries[number];
    if (!e.relative_jump) continue;
    int other = t.number_of(flipped_name(e.name).c_str());
    if (other >= 0 && t.entries[other].relative_jump) e.flipped = static_cast<int16_t>(other);
  }
  if (t.extended_arg_opcode < 0 || t.cache_opcode < 0) {
    throw std::runtime_error("bytecode tables: EXTENDED_ARG or CACHE is missing from dis.opmap");
  }
  if (t.minor >= 12) {
    if (t.end_for_opcode < 0) throw std::runtime_error("bytecode tables: END_FOR is missing from dis.opmap");
    Ref intrinsics = attr(dis.get(), "_intrinsic_1_descs");
    t.intrinsic_unary_positive = index_of(intrinsics.get(), "INTRINSIC_UNARY_POSITIVE");
    t.intrinsic_list_to_tuple = index_of(intrinsics.get(), "INTRINSIC_LIST_TO_TUPLE");
    if (t.intrinsic_unary_positive < 0 || t.intrinsic_list_to_tuple < 0) {
      throw std::runtime_error("bytecode tables: dis._intrinsic_1_descs lacks UNARY_POSITIVE or LIST_TO_TUPLE");
    }
  }
  if (t.minor >= 13 && t.pop_top_opcode < 0) {
    throw std::runtime_error("bytecode tables: POP_TOP is missing from dis.opmap");
  }
  return table;
}

}  // namespace

int OpcodeTable::number_of(const char* name) const {
  if (name == nullptr || *name == 0) return -1;
  for (int number = 0; number < 256; ++number) {
    if (entries[number].defined && names[number] == name) return number;
  }
  return -1;
}

const OpcodeTable& running_opcode_table() {
  // A plain pointer rather than a function-local static: importing `dis` can release the GIL, and a
  // second thread blocked on a static's init guard while holding the GIL would deadlock. Two threads
  // may both build; the loser's copy is dropped. The table is never freed (entries point into it).
  static const OpcodeTable* table = nullptr;
  if (table == nullptr) {
    std::unique_ptr<OpcodeTable> built = build();
    if (table == nullptr) table = built.release();
  }
  return *table;
}

}  // namespace detail

const VersionTraits& version_traits() {
  // PySys_GetObject does not release the GIL, so a function-local static is safe here.
  static const VersionTraits traits = [] {
    VersionTraits t;
    t.minor = detail::running_minor_version();
    t.null_after_callable = t.minor >= 13;  // 3.13 pushes NULL/self after the callable
    return t;
  }();
  return traits;
}

std::vector<OpcodeInfo> opcode_table() {
  const detail::OpcodeTable& t = detail::running_opcode_table();
  std::vector<OpcodeInfo> rows;
  for (int number = 0; number < 256; ++number) {
    const detail::OpcodeEntry& e = t.entries[number];
    if (!e.defined) continue;
    rows.push_back({number, e.name, e.op, detail::rule_name(e.rule), e.caches});
  }
  return rows;
}

}  // namespace ember::bytecode
