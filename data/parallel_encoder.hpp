// parallel_encoder.hpp: a corpus's text pieces (data/documents.hpp) encoded on several threads and
// handed back in the order they were submitted, so the tokens are the same whatever the number of
// threads. Memory is bounded: at most `window` jobs are queued or waiting to be taken.
//
// Each piece that starts a document gets the tokenizer's <|endoftext|> in front of it, as llm.c's
// dev/data/fineweb.py does (tokens = [eot] + encode_ordinary(doc)); a tokenizer without one (byte,
// char) adds nothing, so its documents follow each other with no separator. The text itself is
// encoded as plain text: a "<|endoftext|>" inside a document is spelt out, not the special token.
//
//   data::OrderedEncoder enc(tokenizer, /*threads=*/8, /*window=*/18);
//   if (enc.in_flight() == enc.window()) write(enc.take());   // the oldest job, waited for
//   enc.submit(std::move(job));
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/documents.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::data {

struct EncodeJob {
    std::vector<TextPiece> pieces;
    int64_t input_bytes = 0;   // the sum of the pieces'
    int64_t documents = 0;     // pieces that start a document
};

struct EncodedJob {
    std::vector<int32_t> tokens;
    int64_t input_bytes = 0;
    int64_t documents = 0;
};

// The ids of one piece, appended to `out`: [eot] first when it starts a document and the tokenizer
// has one, then the text (BPE without special tokens).
void encode_piece(const Tokenizer& tokenizer, const TextPiece& piece, std::vector<int32_t>& out);

// A job's ids, appended to `out`: encode_piece of each piece, but a BPE shares one word cache over
// the job's pieces (BpeTokenizer::encode_each), which speeds up many short documents.
void encode_job(const Tokenizer& tokenizer, const EncodeJob& job, std::vector<int32_t>& out);

class OrderedEncoder {
public:
    OrderedEncoder(Tokenizer tokenizer, int threads, size_t window);
    ~OrderedEncoder();   // stops the workers (jobs not taken are dropped)
    OrderedEncoder(const OrderedEncoder&) = delete;
    OrderedEncoder& operator=(const OrderedEncoder&) = delete;

    // Queues a job (InternalError when `window` jobs are already in flight: take() one first).
    void submit(EncodeJob job);
    // The oldest job's tokens, waited for; rethrows the exception its encoding raised.
    EncodedJob take();
    size_t in_flight() const;
    size_t window() const { return window_; }

private:
    struct Slot {
        EncodeJob job;
        EncodedJob result;
        std::exception_ptr error;
        bool done = false;
    };
    void work();

    Tokenizer tokenizer_;
    size_t window_;
    mutable std::mutex mutex_;
    std::condition_variable todo_ready_, slot_done_;
    std::deque<std::shared_ptr<Slot>> todo_;    // not yet picked by a worker
    std::deque<std::shared_ptr<Slot>> order_;   // every job in flight, oldest first
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace ampgrad::data
