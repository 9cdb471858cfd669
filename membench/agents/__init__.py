"""Agents behind one protocol (`base`): scripted reference agents, programs in the sandbox
(`command`), and the spec registry (`registry`)."""
