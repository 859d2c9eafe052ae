"""What the operators say to each other and the rules they follow: the messages (`wire`),
the FIFO channels they travel on (`channels`), who holds what (`partition`), which exit
point view delivers a publication (`cuts`), and the scaling protocols (`scaling`)."""
