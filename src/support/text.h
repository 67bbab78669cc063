// Character classes and message quoting shared by Ember's text parsers (graph IR, sym exprs).
#pragma once

#include <cstdio>
#include <string>

namespace ember::text {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// A character for an error message; bytes outside ASCII are shown by value, since a lone byte of
// a UTF-8 sequence would make the message itself invalid text.
inline std::string quoted_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return "'" + std::string(1, c) + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
  return buf;
}

}  // namespace ember::text
