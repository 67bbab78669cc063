// The two side tables of a code object, read and written in one place (internal to
// src/frontend/bytecode): co_linetable (PEP 626/657 locations) and co_exceptiontable. The decoder
// reads them; the assembler reads and writes them, so both agree on every encoding fact.
//
// Location table: entries cover 1-8 code units; the first byte is 0x80 | code << 3 | (units - 1).
// Codes: 15 no location; 14 long form (signed line delta, end-line delta, column + 1, end column
// + 1 as varints); 13 line delta only (no columns); 10-12 same line + (code - 10), column and end
// column as two bytes; 0-9 short form (same line, column = code * 8 + byte >> 4, end = column +
// byte & 15). Varints: 6-bit chunks, least significant first, 0x40 = more; signed values are
// v << 1, or (-v) << 1 | 1.
//
// Exception table: entries of four varints (start, length, target, depth << 1 | lasti), in code
// units; 6-bit chunks, most significant first, 0x40 = more, 0x80 on an entry's first byte.
//
// Readers throw std::runtime_error with a message naming the table; callers add the code's name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/bytecode/assembler.h"

namespace ember::bytecode::detail {

// The position of every code unit, starting from `first_line`; units past the table's end get
// "no location".
std::vector<Position> read_locations(const uint8_t* data, size_t size, size_t units, int first_line);

struct RawHandler {
  size_t start = 0, end = 0, target = 0, depth = 0;  // code units; [start, end)
  bool lasti = false;
};
std::vector<RawHandler> read_exception_table(const uint8_t* data, size_t size);

// Writes co_linetable entry by entry, choosing the forms CPython's assembler chooses (so a
// round trip is byte-identical): no location; no columns (line delta only) when columns are
// unknown on a one-line span; the short form on the current line for column < 80 and a width
// under 16; the one-line form for a line delta 0-2 with columns < 128; else the long form.
class LocationWriter {
 public:
  explicit LocationWriter(int first_line) : line_(first_line) {}
  // `units` code units at `pos`; spans over 8 units become several entries.
  void add(const Position& pos, int units);
  std::string take() { return std::move(out_); }

 private:
  void entry(const Position& pos, int units);
  void head(int code, int units) { out_.push_back(static_cast<char>(0x80 | code << 3 | (units - 1))); }
  void varint(unsigned value);
  void signed_varint(int value);
  std::string out_;
  int line_;
};

// Appends one exception-table entry (values in code units, minimal-length varints).
void write_exception_entry(std::string& out, const RawHandler& h);

}  // namespace ember::bytecode::detail
