#include "support/stats.h"

namespace ember {

Stats& stats() {
  static Stats s;
  return s;
}

}  // namespace ember
