// The preference pairs of a dataset (training.objective dpo): its records (.jsonl, Parquet,
// Arrow, folders, globs, weighted lists; mixture_source.h) by index, each parsed
// (preference_record.h) and tokenized as TRL does (preference_tokenize.h). A record that makes
// no pair is skipped and counted by its problem, once however often it is read; so is a pair
// whose prompt alone fills max_length (TRL drops those before training: no completion token
// would be left with keep_start truncation). Pairs longer than max_length are kept, truncated
// when batched (preference_batch.h), and counted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "titan/data/chat_template.h"
#include "titan/data/document_source.h"
#include "titan/data/preference_tokenize.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

// How pairs are cut to length (TRL's max_length and truncation_mode).
struct PairLength {
  int64_t max_length = 1024;  // tokens per sequence (prompt + completion); -1: no limit
  bool keep_end = false;      // keep the sequence's end (TRL's keep_end) instead of its start
};

// What the records read so far hold that makes no pair, or is cut, per kind; each record
// counts once however often it is read.
struct PreferenceTally {
  int64_t records = 0;  // distinct records read
  int64_t pairs = 0;    // of them, those that make a pair
  struct Kind {
    int64_t records = 0;
    std::string first;  // where the first one is (file:line)
  };
  std::map<std::string, Kind> problems;  // by kind (RecordProblem::kind), skipped
  Kind truncated;                        // a sequence longer than max_length
  Kind prompt_cut;  // the tokenized prompt's end merged into the completion (kept, as TRL)
  // One line per kind found, e.g. "3 of 40 records read have no \"rejected\": they are skipped
  // (the first: prefs.jsonl:7)"; none when all is well.
  std::vector<std::string> lines() const;
  // No record makes a pair: why, in one sentence.
  std::string why_no_pair() const;
};

class PreferencePairs {
 public:
  // Gives the chat template that renders conversational records, called once, when the first
  // one is read (so that text records never load it); may give null (no template).
  using TemplateLoader = std::function<std::shared_ptr<const ChatTemplate>()>;
  // `eos_token`: the text appended to text completions (tokenizer_config.json's eos_token).
  PreferencePairs(std::unique_ptr<DocumentSource> source,
                  std::shared_ptr<const Tokenizer> tokenizer, TemplateLoader chat_template,
                  std::string eos_token, PairLength length);

  int64_t size() const { return source_->size(); }  // records
  // Record `index`'s pair, or nothing when it makes none. Throws DataReadError when the record
  // cannot be read (a line that is not JSON, a file that changed). Not thread-safe (one reader).
  std::optional<TokenizedPair> read(int64_t index);
  const std::string& path() const { return source_->path(); }
  std::string location(int64_t index) const { return source_->location(index); }
  const PairLength& length() const { return length_; }

  PreferenceTally tally() const;  // thread-safe
  // tally().lines(), each naming the dataset.
  std::vector<std::string> report() const;

 private:
  std::unique_ptr<DocumentSource> source_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  TemplateLoader load_template_;
  bool template_loaded_ = false;
  std::shared_ptr<const ChatTemplate> chat_template_;
  std::string eos_token_;
  PairLength length_;
  mutable std::mutex tally_mutex_;  // the prefetch thread reads, the training thread reports
  PreferenceTally tally_;
  std::vector<bool> counted_;  // by record index
};

}  // namespace titan::data
