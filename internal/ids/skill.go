package ids

// Prefix of skill identifiers (the Skills API).
const Skill = "skill_"
