#include "data/dataset_split.hpp"

#include <cctype>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/error.hpp"
#include "core/message_text.hpp"
#include "data/numpy_math.hpp"

namespace mgt {

const char* split_name(Split split) {
  switch (split) {
    case Split::Train: return "train";
    case Split::Valid: return "valid";
    case Split::Test: return "test";
  }
  return "?";
}

std::array<double, 3> parse_split(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return UsageError("--split " + quoted_for_message(text) + ": " + why +
                      " (give up to three non-negative proportions, e.g. \"969,30,1\")");
  };
  std::vector<double> numbers;
  std::size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isdigit(c) || c == '.') {
      std::size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      std::string run = text.substr(i, j - i);
      // Python's float() of the run: digits with at most one dot and at least one digit.
      bool has_digit = run.find_first_of("0123456789") != std::string::npos;
      if (!has_digit || run.find('.') != run.rfind('.')) throw bad(quoted_for_message(run) + " is not a number");
      numbers.push_back(std::strtod(run.c_str(), nullptr));
      i = j;
      continue;
    }
    if (std::isalpha(c) || c == '-' || c == '+')
      throw bad(std::string("unexpected character '") + static_cast<char>(c) + "'");
    ++i;
  }
  if (numbers.size() > 3) throw bad("more than three numbers");
  while (numbers.size() < 3) numbers.push_back(0.0);
  for (double v : numbers)
    if (!std::isfinite(v)) throw bad("a proportion is too large");
  if (numpy_sum(numbers) == 0.0) throw bad("the proportions sum to zero");
  auto normalized = numpy_normalize(numbers);
  return {normalized[0], normalized[1], normalized[2]};
}

SplitMatrix split_matrix(const std::array<double, 3>& weights) {
  SplitMatrix m;
  double lo = 0.0;
  for (std::size_t i = 0; i < 3; ++i) {
    double hi = lo + weights[i];
    if (hi <= lo) m[i] = std::nullopt;
    else m[i] = std::make_pair(lo, hi);
    lo = hi;
  }
  return m;
}

PyValue split_matrix_value(const SplitMatrix& matrix) {
  PyValue list = PyValue::list();
  for (std::size_t i = 0; i < matrix.size(); ++i) {
    if (!matrix[i]) {
      list.append(PyValue::none());
      continue;
    }
    PyValue lo = i == 0 ? PyValue::integer(0) : PyValue::real(matrix[i]->first);
    list.append(PyValue::list({lo, PyValue::real(matrix[i]->second)}));
  }
  return list;
}

std::pair<std::int64_t, std::int64_t> split_range(const std::pair<double, double>& bounds,
                                                  std::size_t n) {
  // nearbyint honours the current rounding mode; the default (to nearest, ties to even) is
  // Python's round().
  auto round_half_even = [](double x) {
    int saved = std::fegetround();
    std::fesetround(FE_TONEAREST);
    double r = std::nearbyint(x);
    std::fesetround(saved);
    return static_cast<std::int64_t>(r);
  };
  double count = static_cast<double>(n);
  return {round_half_even(bounds.first * count), round_half_even(bounds.second * count)};
}

}  // namespace mgt
