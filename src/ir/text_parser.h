// A cursor over IR text with the graph IR's tokens and argument grammar: whitespace and `//`
// comments, words, string literals, numbers, symbolic expressions, call arguments (value
// references, literals, lists, tuples) and keyword arguments. The graph IR's parser is built on
// it, and so is every IR whose text embeds graph-IR arguments (the loop IR's extern calls), so
// those pieces have one grammar. Errors throw ir::ParseError reading "line:column: message".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace ember::ir {

class TextParser {
 public:
  // `value_prefix` spells a value reference before its id ("%" in graph IR, "%b" for the loop
  // IR's buffers); `value_noun` names one in messages ("a value", "a buffer").
  explicit TextParser(std::string_view text, std::string value_prefix = "%", std::string value_noun = "a value");

  // Ids index vectors, so an absurd id in the text must not allocate gigabytes.
  static constexpr int32_t kMaxId = (1 << 24) - 1;

  // Tokens. Every reader skips whitespace and comments first.
  void skip_space();
  char peek();
  bool consume(char c);
  void expect(char c, const std::string& context);
  std::string_view word();  // the word at the cursor, not consumed ("" if none)
  bool peek_word(std::string_view w);
  void expect_word(std::string_view w, const std::string& context);
  std::string name(const std::string& what);
  std::string found();  // the token at the cursor, for messages

  [[noreturn]] void fail(const std::string& message);
  [[noreturn]] void fail_at(const std::string& message, size_t at);
  std::string location(size_t at) const;  // "line:column"

  std::string string_literal();
  int32_t value_ref();  // value_prefix followed by an id up to kMaxId
  // A symbolic expression. `line_end`: it ends the line, so it is parsed from the current line
  // only (an expression may contain `//`, which a comment on the next line would otherwise extend).
  sym::Expr expr(bool line_end = false);
  std::vector<sym::Expr> expr_list(char close, const char* what);

  // Arguments, as graph IR calls spell them.
  Literal number();
  std::optional<int64_t> slice_part();
  std::vector<Arg> items(char close);
  Arg arg();
  void call_args(std::vector<Arg>& args, std::vector<std::pair<std::string, Arg>>& kwargs);

 protected:
  std::string_view text_;
  size_t pos_ = 0;

 private:
  int depth_ = 0;
  std::string value_prefix_;
  std::string value_noun_;
};

}  // namespace ember::ir
