// SPEC.md §1.9's top-k test rule for index outputs (compare mode "topk" of `attnjit test`), and the
// per-op scorers it needs.
//
// A scorer knows, for one index output of one op, every row's candidate set and the reference fp32
// score of each candidate, computed from the case's host inputs (the tensors the op ran on), and the
// op's score tolerance. check_topk() then checks an output row by row:
//   (a) the number of valid (!= -1) entries equals the row's expected count, and all -1 entries trail;
//   (b) the valid entries are distinct members of the candidate set;
//   (c) the scores at the valid entries, sorted descending, equal the row's top-count scores, sorted
//       descending, within the row's tolerance (so ties and near-ties may go either way);
//   and, when asked (an op's deterministic mode), (d) the valid entries are strictly ascending.
//
// Adding an op: write a TopkScorer subclass and a factory in topk_check.cpp and list it in
// topk_scorers() there (one line).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test_case.hpp"

namespace attnjit::cli {

// One row of an index output, as the scorer sees it.
struct TopkRow {
  std::vector<int64_t> candidates;  // distinct candidate values an entry of this row may hold
  std::vector<float> scores;        // scores[i]: reference fp32 score of candidates[i]
  int64_t expected_count = 0;       // number of valid entries the row must hold (min(width, |C|) usually)
  double tol = 0;                   // absolute tolerance of the sorted-score comparison (0 = exact)
};

class TopkScorer {
 public:
  virtual ~TopkScorer() = default;
  // Rows of the index output: every axis but the innermost, flattened row-major.
  virtual int64_t rows() const = 0;
  // Entries per row (the innermost extent).
  virtual int64_t width() const = 0;
  // Fills `row` for output row r in [0, rows()). Called once per row, concurrently from several
  // threads (one TopkRow each): must not mutate the scorer.
  virtual void row(int64_t r, TopkRow& row) const = 0;
};

// Builds the scorer of case `c`'s op for its index output `output` from the case's host inputs
// (`inputs[i]` holds c.tensors[i]; outputs may hold anything). Throws std::runtime_error when the op
// has no scorer or the inputs are unusable.
std::unique_ptr<TopkScorer> make_topk_scorer(const TestCase& c, const std::vector<HostTensor>& inputs,
                                             const std::string& output);

struct TopkCheckOptions {
  bool ascending = false;  // (d): valid entries strictly ascending (deterministic modes)
};

struct TopkCheckResult {
  bool ok = true;
  std::string detail;     // the first failing row and rule, when !ok
  int64_t rows = 0;       // rows checked
  double worst_gap = 0;   // largest |sorted score difference| / tol seen over the rows with tol > 0
};

// Checks the int32 index output `got` (storage as the case's tensor spec) against the scorer's rows.
TopkCheckResult check_topk(const TopkScorer& scorer, const HostTensor& got, const TopkCheckOptions& opts);

}  // namespace attnjit::cli
