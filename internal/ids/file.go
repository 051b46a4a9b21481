package ids

// Prefix of file identifiers (the Files API).
const File = "file_"
