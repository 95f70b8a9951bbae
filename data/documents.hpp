// documents.hpp: the documents of a text corpus, streamed in order, for `ampgrad data prepare`
// (data/prepare.hpp). The inputs are files or folders (every regular file under a folder, sorted by
// path). A file is one document, except a `.jsonl` file: one document per line, the line's JSON
// object's "text" field (blank lines are skipped).
//
// Documents come out as pieces of at most about `piece_bytes` bytes, so that no file and no line is
// held whole: a long text is cut only just before ASCII whitespace that follows a character that
// is not whitespace (a printable ASCII one, or a valid UTF-8 one outside \s). GPT-2's pre-tokenizer
// (data/pretokenizer.hpp) always ends a pre-token there (no alternative of its regex runs from a
// non-space character into whitespace), it has no look-behind, and the pre-token ending the first
// piece ends there in the whole text too; so encoding the pieces one by one gives exactly the ids
// of encoding the whole text (tests/data/prepare_test.cpp checks it). Cutting anywhere else can
// change ids: "\n\n" at the end of a piece is one pre-token, but "\n" + "\n" before a letter. The
// cut is also a UTF-8 character boundary (the char tokenizer), and any cut suits the byte one. (A
// text with no such place, say megabytes without whitespace, is read until one comes.)
//
//   data::DocumentReader reader(data::list_input_files({"corpus/", "extra.jsonl"}));
//   for (data::TextPiece piece; reader.next(piece);) ...   // piece.starts_document, piece.text
#pragma once
#include <cstdint>
#include <deque>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ampgrad::data {

struct InputFile {
    std::string path;       // absolute, normalised
    int64_t bytes = 0;
    int64_t mtime_ns = 0;   // last modification, ns since the epoch
    bool jsonl = false;     // one document per line ("text" field) instead of one per file
};

// The files that `inputs` name, in order: a file as given, a folder's regular files recursively,
// sorted by path (hidden files, whose name starts with '.', are skipped). IOError naming an input
// that does not exist, and when there is no file at all.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs);

struct TextPiece {
    std::string text;
    bool starts_document = false;   // the first piece of a document
    int64_t input_bytes = 0;        // the input bytes this piece accounts for (progress)
    const InputFile* file = nullptr;
    int64_t line = 0;               // .jsonl: the 1-based line; 0 for a plain file
    int64_t offset = 0;             // byte offset of the piece in its file (plain) or its text (jsonl)
};

// The last place in `text` where it may be cut (see above), as the length of the first part; npos
// when there is none.
size_t last_safe_cut(std::string_view text);
// The first such place at or after `from`; text.size() when there is none.
size_t first_safe_cut_after(std::string_view text, size_t from);

class DocumentReader {
public:
    explicit DocumentReader(std::vector<InputFile> files, size_t piece_bytes = size_t{1} << 20);

    // The next piece in input order; false at the end. FormatError naming the file and the line
    // for a .jsonl line that is not a JSON object with a string "text" field; IOError for a file
    // that cannot be read.
    bool next(TextPiece& piece);
    int64_t documents() const { return documents_; }   // documents started so far
    const std::vector<InputFile>& files() const { return files_; }

private:
    bool open_next_file();
    bool next_plain(TextPiece& piece);
    void read_jsonl_line();
    void read_more(size_t bytes);
    void split_document(std::string text, int64_t input_bytes);

    std::vector<InputFile> files_;
    size_t piece_bytes_;
    size_t file_index_ = 0;   // the open file is files_[file_index_ - 1]
    std::ifstream in_;
    bool file_open_ = false, file_eof_ = false, at_document_start_ = false;
    std::string carry_;           // plain file: bytes read, not yet handed out
    int64_t carry_offset_ = 0;    // their offset in the file
    int64_t line_ = 0;
    std::deque<TextPiece> pending_;   // jsonl: the pieces of the current line
    int64_t documents_ = 0;
};

}  // namespace ampgrad::data
