#include "titan/data/preference_pairs.h"

#include "titan/common/error.h"
#include "titan/data/setting_names.h"

namespace titan::data {
namespace {

constexpr const char* kTemplateRejects = "are rejected by the chat template";

std::string first_of(const PreferenceTally::Kind& kind) {
  return kind.first.empty() ? "" : " (the first: " + kind.first + ")";
}

}  // namespace

std::vector<std::string> PreferenceTally::lines() const {
  std::vector<std::string> out;
  const std::string of = " of " + std::to_string(records) + " records read ";
  for (const auto& [kind, found] : problems)
    out.push_back(std::to_string(found.records) + of + kind + ": " +
                  (found.records == 1 ? "it is" : "they are") + " skipped" + first_of(found));
  if (truncated.records > 0)
    out.push_back(std::to_string(truncated.records) + of +
                  (truncated.records == 1 ? "makes a pair" : "make pairs") + " longer than " +
                  setting_names().max_length + ": cut to it" + first_of(truncated));
  if (prompt_cut.records > 0)
    out.push_back(std::to_string(prompt_cut.records) + of +
                  (prompt_cut.records == 1 ? "has a prompt" : "have prompts") +
                  " whose tokens' end merges into the completion (or that the chat template "
                  "renders otherwise alone): the completion starts where they differ, as in TRL" +
                  first_of(prompt_cut));
  return out;
}

std::string PreferenceTally::why_no_pair() const {
  std::string why = "none of its " + std::to_string(records) + " records makes a preference pair";
  std::vector<std::string> found;
  for (const auto& [kind, count] : problems)
    found.push_back(std::to_string(count.records) + " " + kind + first_of(count));
  for (size_t i = 0; i < found.size(); ++i) why += (i ? "; " : ": ") + found[i];
  return why;
}

PreferencePairs::PreferencePairs(std::unique_ptr<DocumentSource> source,
                                 std::shared_ptr<const Tokenizer> tokenizer,
                                 TemplateLoader chat_template, std::string eos_token,
                                 PairLength length)
    : source_(std::move(source)),
      tokenizer_(std::move(tokenizer)),
      load_template_(std::move(chat_template)),
      eos_token_(std::move(eos_token)),
      length_(length) {}

std::optional<TokenizedPair> PreferencePairs::read(int64_t index) {
  const ParsedPreference parsed = parse_preference_record(source_->record(index));
  std::optional<RecordProblem> problem = parsed.problem;
  std::optional<TokenizedPair> pair;
  if (parsed.record) {
    if (parsed.record->conversational && !template_loaded_) {
      if (load_template_) chat_template_ = load_template_();
      template_loaded_ = true;
    }
    if (parsed.record->conversational && !chat_template_)
      fail("dataset ", source_->location(index),
           ": the record is a conversation, and the tokenizer (", tokenizer_->path(),
           ") has no chat template to render it");
    try {
      pair = tokenize_preference(*parsed.record, *tokenizer_, chat_template_.get(), eos_token_);
    } catch (const DataReadError&) {
      throw;
    } catch (const Error& e) {
      problem = RecordProblem{kTemplateRejects, e.what()};
    }
  }
  if (pair && (pair->chosen.empty() || pair->rejected.empty())) {
    problem = RecordProblem{"have a completion that adds no token to the prompt",
                            "a completion adds no token"};
    pair.reset();
  }
  const int64_t max = length_.max_length;
  if (pair && max >= 0 && !length_.keep_end && static_cast<int64_t>(pair->prompt.size()) >= max) {
    problem = RecordProblem{"have a prompt of " + setting_names().max_length + " = " +
                                std::to_string(max) + " tokens or more (TRL drops them too)",
                            "the prompt fills max_length"};
    pair.reset();
  }
  const auto longer = [&](const std::vector<int32_t>& completion) {
    return max >= 0 && static_cast<int64_t>(pair->prompt.size() + completion.size()) > max;
  };
  std::lock_guard<std::mutex> lock(tally_mutex_);
  if (counted_.empty()) counted_.resize(static_cast<size_t>(source_->size()), false);
  if (!counted_[static_cast<size_t>(index)]) {
    counted_[static_cast<size_t>(index)] = true;
    ++tally_.records;
    const auto note = [&](PreferenceTally::Kind& kind) {
      if (kind.records++ == 0) kind.first = source_->location(index);
    };
    if (pair) {
      ++tally_.pairs;
      if (longer(pair->chosen) || longer(pair->rejected)) note(tally_.truncated);
      if (pair->prompt_cut) note(tally_.prompt_cut);
    } else {
      PreferenceTally::Kind& kind = tally_.problems[problem->kind];
      note(kind);
      // The template's own message says what to fix; the other kinds say it themselves.
      if (kind.records == 1 && problem->kind == kTemplateRejects)
        kind.first += ": " + problem->detail;
    }
  }
  return pair;
}

PreferenceTally PreferencePairs::tally() const {
  std::lock_guard<std::mutex> lock(tally_mutex_);
  return tally_;
}

std::vector<std::string> PreferencePairs::report() const {
  std::vector<std::string> lines = tally().lines();
  for (std::string& line : lines) line = "dataset " + source_->path() + ": " + line;
  return lines;
}

}  // namespace titan::data
