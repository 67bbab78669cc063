// Choosing among a kernel's configs, and caching the choice (autotune.h).
#include "runtime/autotune.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "runtime/cache_files.h"
#include "support/sha256.h"

namespace ember::runtime {

namespace {

using codegen::TritonConfig;

// Bumped when the entry's layout or the key recipe changes.
constexpr const char* kBestFormat = "ember-triton-best-1";
// A move of coordinate descent is kept only when it is this much faster (Inductor's threshold):
// smaller differences are noise between two timings.
constexpr double kDescentImprovement = 0.001;
constexpr int kMaxWarps = 32;

// The config one doubling or halving of `field` (a block's index, or blocks.size() for num_warps)
// away from `from`; nullopt when that leaves the bounds.
std::optional<TritonConfig> neighbour(const TritonConfig& from, size_t field, bool up,
                                      const std::map<std::string, std::pair<int64_t, int64_t>>& block_range) {
  TritonConfig next = from;
  if (field == from.blocks.size()) {
    next.num_warps = up ? from.num_warps * 2 : from.num_warps / 2;
    if (next.num_warps < 1 || next.num_warps > kMaxWarps) return std::nullopt;
    return next;
  }
  auto& [name, value] = next.blocks[field];
  const auto [lowest, highest] = block_range.at(name);
  if (lowest == highest) return std::nullopt;  // fixed by the source: a persistent row's RBLOCK
  value = up ? value * 2 : value / 2;
  if (value < 1 || value > highest) return std::nullopt;
  return next;
}

}  // namespace

uint32_t launch_grid(int64_t xnumel, const TritonConfig& config) {
  for (const auto& [name, value] : config.blocks)
    if (name == "XBLOCK") return static_cast<uint32_t>((xnumel + value - 1) / value);
  throw std::invalid_argument("Triton config '" + config.str() + "' has no XBLOCK");
}

TuneResult tune_configs(const std::vector<TritonConfig>& candidates, const ConfigTimer& timer, bool coordinate_descent) {
  TuneResult result;
  std::optional<double> best;
  std::set<std::string> tried;
  auto time = [&](const TritonConfig& config) {
    tried.insert(config.str());
    ++result.timed;
    std::string why;
    std::optional<double> ms = timer(config, &why);
    if (!ms) result.dropped.push_back(config.str() + ": " + why);
    return ms;
  };
  for (const TritonConfig& config : candidates) {
    std::optional<double> ms = time(config);
    if (ms && (!best || *ms < *best)) best = ms, result.best = config;
  }
  if (!best) {
    std::string reasons;
    for (const std::string& d : result.dropped) reasons += "\n  " + d;
    throw std::runtime_error("no candidate config of the kernel runs:" + reasons);
  }
  if (coordinate_descent) {
    std::map<std::string, std::pair<int64_t, int64_t>> range;  // per block: the candidates' least and largest
    for (const TritonConfig& c : candidates)
      for (const auto& [name, value] : c.blocks) {
        auto [at, fresh] = range.emplace(name, std::make_pair(value, value));
        if (!fresh) at->second = {std::min(at->second.first, value), std::max(at->second.second, value)};
      }
    const int budget = result.timed + kMaxDescentTrials;
    for (bool improved = true; improved && result.timed < budget;) {
      improved = false;
      for (size_t field = 0; field <= result.best.blocks.size(); ++field) {
        for (bool up : {true, false}) {
          std::optional<TritonConfig> next = neighbour(result.best, field, up, range);
          if (!next || tried.count(next->str()) || result.timed >= budget) continue;
          std::optional<double> ms = time(*next);
          if (!ms || *ms >= *best * (1 - kDescentImprovement)) continue;
          best = ms, result.best = *next;
          result.found_by_coordinate_descent = improved = true;
        }
      }
    }
  }
  result.best_ms = *best;
  return result;
}

std::optional<TritonConfig> parse_config(const std::string& text) {
  TritonConfig config;
  std::istringstream words(text);
  std::string word;
  bool warps = false, stages = false;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) return std::nullopt;
    const std::string name = word.substr(0, eq);
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(word.substr(eq + 1), &used);
      if (used != word.size() - eq - 1) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (value < 1) return std::nullopt;
    if (name == "num_warps") {
      config.num_warps = static_cast<int>(value), warps = true;
    } else if (name == "num_stages") {
      config.num_stages = static_cast<int>(value), stages = true;
    } else {
      if (warps || stages) return std::nullopt;  // blocks come first, as str() writes them
      config.blocks.emplace_back(name, value);
    }
  }
  if (!warps || !stages || config.blocks.empty()) return std::nullopt;
  return config;
}

std::string best_config_key(const codegen::TritonKernel& kernel, const std::vector<std::string>& binary_keys,
                            const std::string& device, bool coordinate_descent) {
  Sha256 h;
  add_key_field(h, "format", kBestFormat);
  add_key_field(h, "source", kernel.source);
  for (const TritonConfig& c : kernel.configs) add_key_field(h, "candidate", c.str());
  for (const std::string& key : binary_keys) add_key_field(h, "binary", key);
  add_key_field(h, "device", device);
  add_key_field(h, "coordinate_descent", coordinate_descent ? "1" : "0");
  return Sha256::hex(h.finish());
}

std::string best_config_path(const std::string& cache_dir, const std::string& key) {
  return cache_dir + "/triton/best/" + key + ".json";
}

namespace {

// Checks (creating where missing) every directory between the cache root and the entries, so
// nothing is read from or written to a directory another user controls.
void ensure_best_dirs(const std::string& cache_dir) {
  const uid_t owner = geteuid();
  ensure_private_dir(cache_dir, owner);
  ensure_private_dir(cache_dir + "/triton", owner);
  ensure_private_dir(cache_dir + "/triton/best", owner);
}

}  // namespace

namespace {

// The value of `"name": "..."` in an entry (values never hold a quote or a backslash).
std::optional<std::string> string_field(const std::string& text, const std::string& name) {
  const std::string field = "\"" + name + "\": \"";
  const size_t start = text.find(field);
  if (start == std::string::npos) return std::nullopt;
  const size_t end = text.find('"', start + field.size());
  if (end == std::string::npos) return std::nullopt;
  return text.substr(start + field.size(), end - start - field.size());
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", ms);
  return buf;
}

// The entry's JSON: the config and its tuning, then `extra` fields ("choice", ...).
std::string entry_json(const TuneResult& result, const std::string& extra) {
  return "{\n \"config\": \"" + result.best.str() + "\",\n \"time_ms\": " + ms_text(result.best_ms) +
         ",\n \"found_by_coordinate_descent\": " + (result.found_by_coordinate_descent ? "true" : "false") +
         ",\n \"configs_timed\": " + std::to_string(result.timed) + ",\n" + extra + " \"format\": \"" +
         kBestFormat + "\"\n}\n";
}

}  // namespace

// The entry is JSON for people and tools, read back here by its one "config" field: its value is
// written by TritonConfig::str(), which never contains a quote or a backslash.
std::optional<TritonConfig> load_best_config(const std::string& cache_dir, const std::string& key) {
  ensure_best_dirs(cache_dir);
  std::optional<std::string> text = read_file_if_exists(best_config_path(cache_dir, key));
  std::optional<std::string> config = text ? string_field(*text, "config") : std::nullopt;
  return config ? parse_config(*config) : std::nullopt;
}

void store_best_config(const std::string& cache_dir, const std::string& key, const TuneResult& result) {
  ensure_best_dirs(cache_dir);
  write_file_atomic(best_config_path(cache_dir, key), entry_json(result, ""));
}

MatmulChoice choose_matmul(const StepsTimer& extern_timer, const std::vector<TritonConfig>& template_configs,
                           const ConfigTimer& template_timer, bool coordinate_descent) {
  MatmulChoice choice;
  std::string why;
  std::optional<double> extern_ms = extern_timer(&why);
  if (!extern_ms) throw std::runtime_error("the extern call + epilogue does not run: " + why);
  choice.extern_ms = *extern_ms;
  try {
    choice.template_result = tune_configs(template_configs, template_timer, coordinate_descent);
  } catch (const std::runtime_error& e) {
    choice.template_failed = e.what();
    return choice;
  }
  choice.use_template = choice.template_result.best_ms < choice.extern_ms * (1 - kTemplateImprovement);
  return choice;
}

std::string matmul_choice_key(const codegen::TritonKernel& template_kernel, const std::vector<std::string>& binary_keys,
                              const std::string& extern_steps, const std::string& device, bool coordinate_descent) {
  std::vector<std::string> keys = binary_keys;
  keys.push_back("matmul choice against " + extern_steps);
  return best_config_key(template_kernel, keys, device, coordinate_descent);
}

std::optional<MatmulChoice> load_matmul_choice(const std::string& cache_dir, const std::string& key) {
  ensure_best_dirs(cache_dir);
  std::optional<std::string> text = read_file_if_exists(best_config_path(cache_dir, key));
  std::optional<std::string> which = text ? string_field(*text, "choice") : std::nullopt;
  if (!which || (*which != "extern" && *which != "template")) return std::nullopt;
  MatmulChoice choice;
  choice.use_template = *which == "template";
  if (!choice.use_template) return choice;
  std::optional<std::string> config = string_field(*text, "config");
  std::optional<TritonConfig> parsed = config ? parse_config(*config) : std::nullopt;
  if (!parsed) return std::nullopt;
  choice.template_result.best = *parsed;
  return choice;
}

void store_matmul_choice(const std::string& cache_dir, const std::string& key, const MatmulChoice& choice) {
  ensure_best_dirs(cache_dir);
  const std::string extra = " \"choice\": \"" + std::string(choice.use_template ? "template" : "extern") +
                            "\",\n \"extern_ms\": " + ms_text(choice.extern_ms) + ",\n";
  write_file_atomic(best_config_path(cache_dir, key), entry_json(choice.template_result, extra));
}

std::string describe(const MatmulChoice& choice) {
  std::string s = "extern call + epilogue " + (choice.extern_ms > 0 ? ms_text(choice.extern_ms) + " ms" : "(cached)");
  if (!choice.template_failed.empty()) return s + ", template does not run (" + choice.template_failed + "): extern";
  s += ", template " + choice.template_result.best.str();
  if (choice.template_result.best_ms > 0) s += " " + ms_text(choice.template_result.best_ms) + " ms";
  return s + ": " + (choice.use_template ? "template" : "extern");
}

}  // namespace ember::runtime
