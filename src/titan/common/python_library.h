// The separately loaded library that embeds CPython (libtitan_transformers.so): the
// Transformers modeling backend and the chat-template renderer of SFT live there, so that titan
// itself never links Python and its native paths work where that Python is missing. Loaded once,
// on first use, and kept for the life of the process.
#pragma once

namespace titan {

// The address of `symbol` in the library (<dir of titan>/../lib/libtitan_transformers.so, or
// $TITAN_TRANSFORMERS_BACKEND). Throws titan::Error saying why when the library is missing,
// cannot be loaded or lacks the symbol; `what` names the feature in that message.
void* python_library_symbol(const char* symbol, const char* what);

}  // namespace titan
