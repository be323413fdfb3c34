// Preference pairs (training.objective dpo): reading TRL's three record layouts and naming each
// problem, extract_prompt's splits, the batch layout (rows chosen then rejected, shifted,
// completion-only labels, TRL's cuts), and the loader: a global batch split over ranks without
// splitting a pair, bad records skipped and counted, a file of them one error, exact resume.
// tests/integration/test_preference_data.py checks the token ids against TRL itself.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../error_of.h"
#include "test_helpers.h"
#include "titan/data/preference_batch.h"
#include "titan/data/preference_loader.h"
#include "titan/data/preference_record.h"

namespace titan::data {
namespace {

using Json = nlohmann::ordered_json;
using testing::qwen3_tokenizer;
using testing::TempFile;

Json message(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

std::string problem_of(const Json& record) {
  const ParsedPreference parsed = parse_preference_record(record);
  EXPECT_FALSE(parsed.record.has_value());
  return parsed.problem ? parsed.problem->kind : "";
}

TEST(PreferenceRecord, ReadsTheThreeLayoutsOfTrl) {
  const auto standard =
      parse_preference_record({{"prompt", "Q:"}, {"chosen", " a"}, {"rejected", " b"}});
  ASSERT_TRUE(standard.record);
  EXPECT_FALSE(standard.record->conversational);
  EXPECT_FALSE(standard.record->implicit_prompt);

  const Json prompt = Json::array({message("user", "q")});
  const auto chat =
      parse_preference_record({{"prompt", prompt},
                               {"chosen", Json::array({message("assistant", "a")})},
                               {"rejected", Json::array({message("assistant", "b")})},
                               {"tools", "[{\"type\": \"function\"}]"},
                               {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_TRUE(chat.record);
  EXPECT_TRUE(chat.record->conversational);
  EXPECT_TRUE(chat.record->tools.is_array());  // the JSON string parsed, as TRL's json.loads
  EXPECT_EQ(chat.record->chat_template_kwargs["enable_thinking"], false);

  const auto implicit = parse_preference_record(
      {{"chosen", Json::array({message("user", "q"), message("assistant", "a")})},
       {"rejected", Json::array({message("user", "q"), message("assistant", "b")})}});
  ASSERT_TRUE(implicit.record);
  EXPECT_TRUE(implicit.record->implicit_prompt);
  EXPECT_EQ(implicit.record->prompt, prompt);
  EXPECT_EQ(implicit.record->chosen, Json::array({message("assistant", "a")}));
}

TEST(PreferenceRecord, NamesEachProblem) {
  EXPECT_EQ(problem_of({{"prompt", "p"}, {"chosen", "a"}}), "have no \"rejected\"");
  EXPECT_EQ(problem_of({{"prompt", "p"}, {"chosen", nullptr}, {"rejected", "a"}}),
            "have no \"chosen\"");
  EXPECT_EQ(problem_of({{"prompt", "p"}, {"chosen", "a"}, {"rejected", ""}}),
            "have an empty \"rejected\"");
  EXPECT_EQ(problem_of({{"prompt", "p"}, {"chosen", " x"}, {"rejected", " x"}}),
            "have the same chosen and rejected");
  // Messages are equal whatever their keys' order, as Python's dicts are.
  EXPECT_EQ(problem_of({{"prompt", Json::array({message("user", "q")})},
                        {"chosen", Json::array({message("assistant", "a")})},
                        {"rejected", Json::parse(R"([{"content": "a", "role": "assistant"}])")}}),
            "have the same chosen and rejected");
  EXPECT_NE(problem_of({{"prompt", "p"}, {"chosen", 3}, {"rejected", "a"}}).find("neither text"),
            std::string::npos);
  EXPECT_NE(
      problem_of({{"prompt", "p"}, {"chosen", Json::array({Json::object()})}, {"rejected", "a"}})
          .find("neither text"),
      std::string::npos);
  EXPECT_EQ(
      problem_of(
          {{"prompt", Json::array({message("user", "q")})}, {"chosen", "a"}, {"rejected", "b"}}),
      "mix text and lists of messages in prompt, chosen and rejected");
  EXPECT_NE(problem_of({{"chosen", Json::array({message("user", "x"), message("assistant", "a")})},
                        {"rejected", Json::array({message("user", "y")})}})
                .find("no prompt message"),
            std::string::npos);
  EXPECT_NE(problem_of({{"prompt", "p"}, {"chosen", "a"}, {"rejected", "b"}, {"tools", "{"}})
                .find("\"tools\""),
            std::string::npos);
}

TEST(ExtractPrompt, MovesTheSpaceBeforeTheDifferenceToTheCompletions) {
  const ExtractedPrompt e = extract_prompt(std::string("The sky is blue."), "The sky is green.");
  EXPECT_EQ(e.prompt, "The sky is");
  EXPECT_EQ(e.chosen, " blue.");
  EXPECT_EQ(e.rejected, " green.");
}

TEST(ExtractPrompt, CountsCodePointsAndNeverSplitsOne) {
  // "é" and "è" share their first UTF-8 byte: the split is before the whole code point.
  const ExtractedPrompt e = extract_prompt(std::string("x é"), "x è");
  EXPECT_EQ(e.prompt, "x");
  EXPECT_EQ(e.chosen, " é");
  EXPECT_EQ(e.rejected, " è");
}

TEST(ExtractPrompt, KeepsTrlsEdgeCases) {
  // No difference within the shorter text: the loop leaves its index on the last code point.
  ExtractedPrompt e = extract_prompt(std::string("abc"), "abcd");
  EXPECT_EQ(e.prompt, "ab");
  EXPECT_EQ(e.chosen, "c");
  EXPECT_EQ(e.rejected, "cd");
  // A difference at the first code point looks at chosen[-1]: its last, a space here.
  e = extract_prompt(std::string("Yes "), "No");
  EXPECT_EQ(e.prompt, "Yes");
  EXPECT_EQ(e.chosen, " ");
  EXPECT_EQ(e.rejected, "o");
}

TokenizedPair pair_of(std::vector<int32_t> prompt, std::vector<int32_t> chosen,
                      std::vector<int32_t> rejected) {
  return {std::move(prompt), std::move(chosen), std::move(rejected), false};
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const at::Tensor x = t[r].contiguous();
  return {x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()};
}

TEST(CollatePairs, ChosenRowsFirstShiftedWithCompletionLabelsAndRightPadding) {
  const PairBatch pb = collate_pairs(
      {pair_of({1, 2}, {3, 4}, {5}), pair_of({6}, {7, 8, 9}, {10, 11})}, {4, 9}, PairLength{},
      /*pad_id=*/0);
  const Batch& b = pb.rows;
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{4, 3}));  // the longest: 4 tokens, shifted
  EXPECT_EQ(row(b.inputs, 0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(row(b.labels, 0), (std::vector<int64_t>{-100, 3, 4}));
  EXPECT_EQ(row(b.inputs, 1), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(row(b.labels, 1), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(row(b.inputs, 2), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(row(b.labels, 2), (std::vector<int64_t>{-100, 5, -100}));
  EXPECT_EQ(row(b.inputs, 3), (std::vector<int64_t>{6, 10, 0}));
  EXPECT_EQ(row(b.labels, 3), (std::vector<int64_t>{10, 11, -100}));
  EXPECT_EQ(row(pb.completion_tokens.unsqueeze(0), 0), (std::vector<int64_t>{2, 3, 1, 2}));
  EXPECT_EQ(row(pb.records.unsqueeze(0), 0), (std::vector<int64_t>{4, 9}));

  const PairBatch padded = collate_pairs({pair_of({1}, {2}, {3})}, {0}, PairLength{}, 0, 8);
  EXPECT_EQ(padded.rows.inputs.size(1), 8);
}

TEST(CollatePairs, CutsEachSequenceAsTrlDoes) {
  const TokenizedPair p = pair_of({1, 2, 3}, {4, 5, 6}, {7});
  // keep_start: the first max_length tokens of prompt + completion.
  PairBatch b = collate_pairs({p}, {0}, PairLength{4, false}, 0);
  EXPECT_EQ(row(b.rows.inputs, 0), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(row(b.rows.labels, 0), (std::vector<int64_t>{-100, -100, 4}));
  EXPECT_EQ(row(b.completion_tokens.unsqueeze(0), 0), (std::vector<int64_t>{1, 1}));
  // keep_end: the last ones; the prompt is cut first.
  b = collate_pairs({p}, {0}, PairLength{4, true}, 0);
  EXPECT_EQ(row(b.rows.inputs, 0), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(row(b.rows.labels, 0), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(row(b.completion_tokens.unsqueeze(0), 0), (std::vector<int64_t>{3, 1}));
}

std::string standard_records(int n, const std::string& bad_every = "") {
  std::string text;
  for (int i = 0; i < n; ++i) {
    if (!bad_every.empty() && i % 3 == 1) {
      text += bad_every + "\n";
      continue;
    }
    text += Json({{"prompt", "Question " + std::to_string(i) + ":"},
                  {"chosen", " good answer " + std::to_string(i)},
                  {"rejected", " bad"}})
                .dump() +
            "\n";
  }
  return text;
}

PreferenceLoaderOptions options(int64_t pairs) {
  PreferenceLoaderOptions o;
  o.local_batch_size = pairs;
  o.eos_token = "<|im_end|>";
  return o;
}

TEST(PreferenceLoader, RanksTakeTheirPairsOfTheGlobalBatchWithoutSplittingOne) {
  const TempFile file("prefs.jsonl", standard_records(10, R"({"prompt": "p", "chosen": "x"})"));
  PreferenceLoader whole(qwen3_tokenizer(), file.path(), options(4));
  PreferenceLoaderOptions o = options(2);
  o.row_ranks = 2;
  PreferenceLoader rank0(qwen3_tokenizer(), file.path(), o);
  o.row_rank = 1;
  PreferenceLoader rank1(qwen3_tokenizer(), file.path(), o);
  for (int step = 0; step < 3; ++step) {
    const PairBatch all = whole.next_pairs(), first = rank0.next_pairs(),
                    second = rank1.next_pairs();
    // Global pairs [0, 2) and [2, 4): each rank's chosen rows and its rejected rows.
    EXPECT_TRUE(at::equal(all.records, at::cat({first.records, second.records})));
    for (int64_t pair = 0; pair < 4; ++pair) {
      const PairBatch& mine = pair < 2 ? first : second;
      const int64_t r = pair % 2;
      EXPECT_EQ(mine.completion_tokens[r].item<int64_t>(),
                all.completion_tokens[pair].item<int64_t>());
      EXPECT_EQ(mine.completion_tokens[2 + r].item<int64_t>(),
                all.completion_tokens[4 + pair].item<int64_t>());
    }
  }
  // Records 1, 4 and 7 make no pair: they are skipped, and counted once each.
  const PreferenceTally tally = whole.tally();
  EXPECT_EQ(tally.records, 10);
  EXPECT_EQ(tally.pairs, 7);
  EXPECT_EQ(tally.problems.at("have no \"rejected\"").records, 3);
  EXPECT_EQ(tally.problems.at("have no \"rejected\"").first, file.path() + ":2");
}

TEST(PreferenceLoader, ResumesExactlyAndShufflesEachEpochAnew) {
  const TempFile file("prefs.jsonl", standard_records(7));
  PreferenceLoaderOptions o = options(3);
  o.shuffle_seed = 5;
  PreferenceLoader reference(qwen3_tokenizer(), file.path(), o);
  std::vector<PairBatch> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(reference.next_pairs());
  // Over the first epochs each record comes once per epoch, in orders that differ.
  std::vector<int64_t> seen;
  for (const PairBatch& b : batches)
    for (int64_t i = 0; i < b.records.numel(); ++i) seen.push_back(b.records[i].item<int64_t>());
  std::vector<int64_t> epoch0(seen.begin(), seen.begin() + 7),
      epoch1(seen.begin() + 7, seen.begin() + 14);
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(epoch1, epoch0);

  PreferenceLoader first(qwen3_tokenizer(), file.path(), o);
  first.next_pairs();
  first.next_pairs();
  o.prefetch = 2;  // batches made ahead on a thread are the same
  PreferenceLoader resumed(qwen3_tokenizer(), file.path(), o);
  resumed.load_state(first.state());
  for (int i = 2; i < 5; ++i) {
    const PairBatch b = resumed.next_pairs();
    EXPECT_TRUE(at::equal(b.rows.inputs, batches[i].rows.inputs)) << i;
    EXPECT_TRUE(at::equal(b.rows.labels, batches[i].rows.labels)) << i;
  }
}

TEST(PreferenceLoader, AFileOfBadRecordsIsOneErrorSayingWhy) {
  const TempFile file("prefs.jsonl",
                      "{\"prompt\": \"p\", \"chosen\": \"a\"}\n"
                      "{\"prompt\": \"p\", \"chosen\": \" x\", \"rejected\": \" x\"}\n");
  PreferenceLoader loader(qwen3_tokenizer(), file.path(), options(1));
  const std::string error = titan::testing::error_of([&] { loader.next_pairs(); });
  EXPECT_NE(error.find("none of its 2 records makes a preference pair: 1 have no \"rejected\""),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("1 have the same chosen and rejected"), std::string::npos) << error;
}

}  // namespace
}  // namespace titan::data
