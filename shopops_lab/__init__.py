"""ShopOps Lab: the teaching engine behind the course notebooks."""
__version__ = "0.1.0"
