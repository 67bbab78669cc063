// Reading and writing co_linetable and co_exceptiontable (formats in code_tables.h).
//
// The writer's choice among equivalent location forms follows the rules CPython's assembler
// applies (Python/assemble.c on 3.12/3.13, the location writer in Python/compile.c on 3.11, read
// for the rules only); the byte-identical round-trip tests over the standard library hold it to them.
#include "frontend/bytecode/code_tables.h"

#include <stdexcept>

namespace ember::bytecode::detail {
namespace {

class LocationReader {
 public:
  LocationReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  std::vector<Position> run(size_t units, int first_line) {
    std::vector<Position> out(units);
    long line = first_line;
    size_t unit = 0;
    while (pos_ < size_ && unit < units) {
      uint8_t head = data_[pos_++];
      if ((head & 0x80) == 0) throw std::runtime_error("co_linetable entry does not start with a header byte");
      int code = (head >> 3) & 15;
      size_t length = (head & 7) + 1u;
      Position p;
      if (code == 15) {
        // no location: p stays all -1
      } else if (code == 14) {
        line += signed_varint();
        p.line = static_cast<int>(line);
        p.end_line = static_cast<int>(line + static_cast<long>(varint()));
        p.col = static_cast<int>(varint()) - 1;
        p.end_col = static_cast<int>(varint()) - 1;
      } else if (code == 13) {
        line += signed_varint();
        p.line = p.end_line = static_cast<int>(line);
      } else if (code >= 10) {
        line += code - 10;
        p.line = p.end_line = static_cast<int>(line);
        p.col = next();
        p.end_col = next();
      } else {
        uint8_t second = next();
        p.line = p.end_line = static_cast<int>(line);
        p.col = code * 8 + (second >> 4);
        p.end_col = p.col + (second & 15);
      }
      for (size_t i = 0; i < length && unit < units; ++i, ++unit) out[unit] = p;
    }
    return out;
  }

 private:
  uint8_t next() {
    if (pos_ >= size_) throw std::runtime_error("co_linetable ends inside an entry");
    return data_[pos_++];
  }
  unsigned long varint() {
    uint8_t b = next();
    unsigned long value = b & 63;
    int shift = 6;
    while (b & 64) {
      b = next();
      if (shift > 30) throw std::runtime_error("co_linetable varint too long");
      value |= static_cast<unsigned long>(b & 63) << shift;
      shift += 6;
    }
    return value;
  }
  long signed_varint() {
    unsigned long v = varint();
    return (v & 1) ? -static_cast<long>(v >> 1) : static_cast<long>(v >> 1);
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Position> read_locations(const uint8_t* data, size_t size, size_t units, int first_line) {
  return LocationReader(data, size).run(units, first_line);
}

std::vector<RawHandler> read_exception_table(const uint8_t* data, size_t size) {
  std::vector<RawHandler> out;
  size_t pos = 0;
  auto varint = [&](bool first) {
    if (pos >= size) throw std::runtime_error("co_exceptiontable ends inside an entry");
    uint8_t b = data[pos++];
    if (first != ((b & 0x80) != 0)) throw std::runtime_error("co_exceptiontable entry boundary is misplaced");
    size_t value = b & 63;
    while (b & 64) {
      if (pos >= size) throw std::runtime_error("co_exceptiontable ends inside a varint");
      b = data[pos++];
      if (value > (size_t{1} << 40)) throw std::runtime_error("co_exceptiontable varint too long");
      value = (value << 6) | (b & 63);
    }
    return value;
  };
  while (pos < size) {
    RawHandler h;
    h.start = varint(true);
    h.end = h.start + varint(false);
    h.target = varint(false);
    size_t depth_lasti = varint(false);
    h.depth = depth_lasti >> 1;
    h.lasti = (depth_lasti & 1) != 0;
    out.push_back(h);
  }
  return out;
}

void LocationWriter::add(const Position& pos, int units) {
  while (units > 8) {
    entry(pos, 8);
    units -= 8;
  }
  if (units > 0) entry(pos, units);
}

void LocationWriter::entry(const Position& p, int units) {
  if (p.line < 0) {
    head(15, units);
    return;
  }
  int delta = p.line - line_;
  if (p.col < 0 || p.end_col < 0) {
    if (p.end_line == p.line || p.end_line == -1) {
      head(13, units);
      signed_varint(delta);
      line_ = p.line;
      return;
    }
  } else if (p.end_line == p.line) {
    if (delta == 0 && p.col < 80 && p.end_col - p.col < 16 && p.end_col >= p.col) {
      head(p.col / 8, units);
      out_.push_back(static_cast<char>((p.col % 8) << 4 | (p.end_col - p.col)));
      return;
    }
    if (delta >= 0 && delta < 3 && p.col < 128 && p.end_col < 128) {
      head(10 + delta, units);
      out_.push_back(static_cast<char>(p.col));
      out_.push_back(static_cast<char>(p.end_col));
      line_ = p.line;
      return;
    }
  }
  head(14, units);
  signed_varint(delta);
  varint(static_cast<unsigned>(p.end_line - p.line));
  varint(static_cast<unsigned>(p.col + 1));
  varint(static_cast<unsigned>(p.end_col + 1));
  line_ = p.line;
}

void LocationWriter::varint(unsigned value) {
  while (value >= 64) {
    out_.push_back(static_cast<char>(64 | (value & 63)));
    value >>= 6;
  }
  out_.push_back(static_cast<char>(value));
}

void LocationWriter::signed_varint(int value) {
  varint(value < 0 ? (static_cast<unsigned>(-value) << 1) | 1u : static_cast<unsigned>(value) << 1);
}

void write_exception_entry(std::string& out, const RawHandler& h) {
  auto item = [&](size_t value, int first_bit) {
    if (value >= (size_t{1} << 30)) throw std::invalid_argument("exception table value " + std::to_string(value) + " does not fit 30 bits");
    bool started = false;
    for (int shift = 24; shift > 0; shift -= 6) {
      if (!started && value < (size_t{1} << shift)) continue;
      out.push_back(static_cast<char>(((value >> shift) & 63) | 64 | first_bit));
      first_bit = 0;
      started = true;
    }
    out.push_back(static_cast<char>((value & 63) | first_bit));
  };
  item(h.start, 0x80);
  item(h.end - h.start, 0);
  item(h.target, 0);
  item(h.depth << 1 | (h.lasti ? 1 : 0), 0);
}

}  // namespace ember::bytecode::detail
