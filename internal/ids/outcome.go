package ids

// Prefix of outcome identifiers (user.define_outcome).
const Outcome = "outc_"
