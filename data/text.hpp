// text.hpp: the training text: the bundled corpus (Tiny Shakespeare, embedded in the library, so
// nothing is downloaded and nothing is looked up at run time) or a user's text file, checked.
//
//   std::string_view corpus = data::tiny_shakespeare();     // 1,115,394 bytes of plain ASCII
//   std::string text = data::read_text_file("notes.txt");   // IOError if missing, empty, binary...
#pragma once
#include <string>
#include <string_view>

namespace ampgrad::data {

// Tiny Shakespeare (Karpathy's char-rnn corpus: 40,000 lines of Shakespeare's plays, public
// domain), compiled into libampgrad from data/tinyshakespeare.txt.
std::string_view tiny_shakespeare();

// The whole file. IOError naming the path and the fact when it is missing, not a regular file,
// unreadable, empty, or not text (a NUL byte, or bytes that are not valid UTF-8, with the offset).
std::string read_text_file(const std::string& path);

// The byte offset of the first invalid UTF-8 sequence (or NUL byte), or npos when `text` is valid.
size_t first_invalid_utf8(std::string_view text);

}  // namespace ampgrad::data
