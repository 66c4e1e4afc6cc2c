"""The reading component: the one place where text is read for meaning (question analysis, whether evidence
answers a question, ranking passages and sentences, how far an answer is supported, the probability that an answer
is right)."""
